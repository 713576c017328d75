# Probe (run on the GPU machine): what max.f32, min.f32 and max.NaN.f32 return
# for +0.0 and -0.0 in each operand order; docs/backend.md cites its result.
import ctypes, struct
cu = ctypes.CDLL("libcuda.so.1")
def ck(r, what):
    if r != 0: raise SystemExit(f"{what}: CUresult {r}")
ptx = b"""
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out, .param .u64 in) {
  .reg .b64 %rd<4>; .reg .f32 %f<16>;
  ld.param.u64 %rd1, [out]; ld.param.u64 %rd2, [in];
  cvta.to.global.u64 %rd1, %rd1; cvta.to.global.u64 %rd2, %rd2;
  ld.global.volatile.f32 %f1, [%rd2]; ld.global.volatile.f32 %f2, [%rd2+4];
  max.f32 %f3, %f1, %f2; max.f32 %f4, %f2, %f1; min.f32 %f5, %f1, %f2; min.f32 %f6, %f2, %f1;
  max.NaN.f32 %f7, %f1, %f2; max.NaN.f32 %f8, %f2, %f1;
  st.global.f32 [%rd1], %f3; st.global.f32 [%rd1+4], %f4; st.global.f32 [%rd1+8], %f5; st.global.f32 [%rd1+12], %f6;
  st.global.f32 [%rd1+16], %f7; st.global.f32 [%rd1+20], %f8;
  ret;
}
"""
ck(cu.cuInit(0), "init"); dev = ctypes.c_int(); ck(cu.cuDeviceGet(ctypes.byref(dev), 0), "dev")
ctx = ctypes.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "ctx"); ck(cu.cuCtxSetCurrent(ctx), "cur")
mod = ctypes.c_void_p(); ck(cu.cuModuleLoadData(ctypes.byref(mod), ptx), "load")
fn = ctypes.c_void_p(); ck(cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"k"), "fn")
dout, din = ctypes.c_uint64(), ctypes.c_uint64()
ck(cu.cuMemAlloc_v2(ctypes.byref(dout), 64), "alloc"); ck(cu.cuMemAlloc_v2(ctypes.byref(din), 64), "alloc")
for a, b in [(0.0, -0.0), (-0.0, 0.0)]:
    buf = struct.pack("ff", a, b)
    ck(cu.cuMemcpyHtoD_v2(din, buf, 8), "h2d")
    args = (ctypes.c_void_p * 2)(ctypes.cast(ctypes.pointer(dout), ctypes.c_void_p), ctypes.cast(ctypes.pointer(din), ctypes.c_void_p))
    ck(cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, args, None), "launch"); ck(cu.cuCtxSynchronize(), "sync")
    res = ctypes.create_string_buffer(24); ck(cu.cuMemcpyDtoH_v2(res, dout, 24), "d2h")
    v = struct.unpack("6f", res.raw)
    print(f"a={a!r} b={b!r}: max(a,b)={v[0]!r} max(b,a)={v[1]!r} min(a,b)={v[2]!r} min(b,a)={v[3]!r} max.NaN={v[4]!r},{v[5]!r}")
