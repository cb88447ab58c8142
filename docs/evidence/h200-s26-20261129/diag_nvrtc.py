def test_diag():
    from cuda.bindings import nvrtc
    from robocache import _cuda
    print("\nDIAG b' ' is", repr(b" "), "b' '*3", repr(b" " * 3))
    src = _cuda.source("episodes").encode()
    err, prog = nvrtc.nvrtcCreateProgram(src, b"episodes.cu", 0, [], [])
    opts = [b"-arch=sm_90", b"--ptxas-options=-v", b"--std=c++17"]
    print("DIAG compile", nvrtc.nvrtcCompileProgram(prog, len(opts), opts))
    err, n = nvrtc.nvrtcGetProgramLogSize(prog)
    print("DIAG logsize", err, n)
    log = bytes(bytearray(n))
    print("DIAG getlog", nvrtc.nvrtcGetProgramLog(prog, log))
    print("DIAG log", repr(log[:300]))
    log2 = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, log2)
    print("DIAG log2", repr(log2[:120]))
