#include "shim.h"
thread_local dim3 threadIdx;
dim3 blockIdx, blockDim, gridDim;
std::barrier<>* g_bar = nullptr;
std::atomic<int> g_sync_or{0};
alignas(16) unsigned char g_smem[RC_EMU_SMEM_BYTES];
// run fn for every thread of every block (blocks one after another, threads of a block concurrently)
void rc_emulate(unsigned grid, unsigned block, const std::function<void()>& fn) {
    gridDim.x = grid; blockDim.x = block;
    for (unsigned b = 0; b < grid; ++b) {
        blockIdx.x = b;
        std::memset(g_smem, 0xA5, sizeof(g_smem));  // garbage: the kernel must initialise what it reads
        std::barrier<> bar((std::ptrdiff_t)block);
        g_bar = &bar;
        std::vector<std::thread> ts;
        ts.reserve(block);
        for (unsigned t = 0; t < block; ++t)
            ts.emplace_back([t, &fn] { threadIdx.x = t; fn(); });
        for (auto& th : ts) th.join();
    }
}
