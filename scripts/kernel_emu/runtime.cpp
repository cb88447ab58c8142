#include "shim.h"
#include <sys/mman.h>
#include <unistd.h>
thread_local dim3 threadIdx;
dim3 blockIdx, blockDim, gridDim;
std::barrier<>* g_bar = nullptr;
std::atomic<int> g_sync_or{0};
alignas(16) unsigned char g_smem[RC_EMU_SMEM_BYTES];
unsigned char* g_dyn_smem = nullptr;  // no launch has said its size yet: any access faults
static unsigned long long g_dyn_bytes = 0;
static unsigned char* g_dyn_region = nullptr;  // RC_EMU_SMEM_BYTES of memory, then a page of none
extern "C" void rc_emu_dyn_smem(unsigned long long bytes) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (!g_dyn_region) {
        void* p = mmap(nullptr, RC_EMU_SMEM_BYTES + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED || mprotect((unsigned char*)p + RC_EMU_SMEM_BYTES, page, PROT_NONE) != 0) {
            std::fprintf(stderr, "kernel_emu: cannot map the guarded shared memory\n");
            std::abort();
        }
        g_dyn_region = (unsigned char*)p;
    }
    if (bytes > RC_EMU_SMEM_BYTES) {
        std::fprintf(stderr, "kernel_emu: %llu bytes of dynamic shared memory, more than the emulator's %d\n", bytes,
                     RC_EMU_SMEM_BYTES);
        std::abort();
    }
    g_dyn_bytes = (bytes + 15) & ~15ull;
    g_dyn_smem = g_dyn_region + RC_EMU_SMEM_BYTES - g_dyn_bytes;
}
// run fn for every thread of every block (blocks one after another, threads of a block concurrently)
void rc_emulate(unsigned grid, unsigned block, const std::function<void()>& fn) {
    gridDim.x = grid; blockDim.x = block;
    for (unsigned b = 0; b < grid; ++b) {
        blockIdx.x = b;
        std::memset(g_smem, 0xA5, sizeof(g_smem));  // garbage: the kernel must initialise what it reads
        if (g_dyn_bytes) std::memset(g_dyn_smem, 0xA5, g_dyn_bytes);
        std::barrier<> bar((std::ptrdiff_t)block);
        g_bar = &bar;
        std::vector<std::thread> ts;
        ts.reserve(block);
        for (unsigned t = 0; t < block; ++t)
            ts.emplace_back([t, &fn] { threadIdx.x = t; fn(); });
        for (auto& th : ts) th.join();
    }
}
