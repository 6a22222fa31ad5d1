"""How the patterns look in real code (RULES.md, "real shapes to expect"), and the
legitimate cases the spec allows, which must stay clean. Snippets written for
these tests; each is the smallest code with the shape."""

from __future__ import annotations

import textwrap

import pytest

from app.checks import gpu_tests
from app.checks.rust_index import extract
from app.checks.workspace import SourceFile, Workspace
from app.config import RepoConfig
from tests.conftest import rules_found, run_analysis

VIOLATIONS = {
    "fake-gpu: host loop over gpu_to_cpu then upload": (
        "fake-gpu-function",
        """
        pub fn gpu_softplus(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            let host = gpu_to_cpu(x, dev)?;
            let out: Vec<f32> = host.iter().map(|v| (1.0 + v.exp()).ln()).collect();
            cpu_to_gpu(&out, dev)
        }
        """,
    ),
    "fake-gpu: located in a -gpu crate, read back, loop, upload": (
        "fake-gpu-function",
        """
        pub fn softplus(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            let host = read_back(x, dev)?;
            let mut out = Vec::new();
            for v in host.iter() { out.push((1.0 + v.exp()).ln()); }
            cpu_to_gpu(&out, dev)
        }
        fn read_back(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<Vec<f32>> { gpu_to_cpu(x, dev) }
        """,
    ),
    "deferred-kernel: todo! behind a size check": (
        "deferred-kernel",
        """
        pub fn cuda_conv2d(x: &CudaSlice<f32>, k: usize) -> Result<CudaSlice<f32>, GpuError> {
            if k > 7 {
                todo!("large kernels");
            }
            launch_conv(x, k)
        }
        """,
    ),
    "deferred-kernel: unimplemented! in the Cuda arm of a dispatch": (
        "deferred-kernel",
        """
        pub fn cumsum(t: &Tensor) -> Result<Tensor, Error> {
            match t.device() {
                Device::Cpu => cumsum_cpu(t),
                Device::Cuda(_) => unimplemented!(),
            }
        }
        """,
    ),
    "cfg-gated-stub: returns its input unchanged": (
        "cfg-gated-stub",
        """
        #[cfg(feature = "cuda")]
        pub fn synchronize_all(x: Tensor) -> Tensor {
            x
        }
        """,
    ),
    "cpu-dispatch-arm: or-pattern routes Cuda to the CPU routine": (
        "cpu-dispatch-arm",
        """
        pub fn gelu(t: &Tensor) -> Result<Tensor, Error> {
            match t.device() {
                Device::Cpu | Device::Cuda(_) => gelu_cpu(t),
            }
        }
        """,
    ),
    "cpu-dispatch-arm: is_cuda branch copies to host": (
        "cpu-dispatch-arm",
        """
        pub fn unary_map(x: &Tensor, f: impl Fn(f32) -> f32) -> Result<Tensor, Error> {
            if x.is_cuda() {
                let data = x.data_vec()?;
                let out: Vec<f32> = data.iter().map(|v| f(*v)).collect();
                return Tensor::from_vec(out).to(x.device());
            }
            Ok(x.map_cpu(f))
        }
        """,
    ),
    "autograd-cpu-detour: data_vec then rebuild": (
        "autograd-cpu-detour",
        """
        impl GradFn for SoftmaxBackward {
            fn backward(&self, grad: &Tensor) -> Result<Vec<Tensor>, Error> {
                let g = grad.data_vec()?;
                let y = self.output.data_vec()?;
                let dx: Vec<f32> = g.iter().zip(y.iter()).map(|(a, b)| a * b).collect();
                Ok(vec![Tensor::from_vec(dx).to(grad.device())?])
            }
        }
        """,
    ),
    "host-readback-per-op: partial reduce, read back, sum on host, upload one number": (
        "host-readback-per-op",
        """
        pub fn gpu_norm(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            let partials = launch_partial_sq_sums(x, dev)?;
            let host = gpu_to_cpu(&partials, dev)?;
            let total: f32 = host.iter().sum::<f32>().sqrt();
            cpu_to_gpu(&[total], dev)
        }
        """,
    ),
    "host-readback-per-op: a portable op whose runner uploads, launches and returns a Vec": (
        "host-readback-per-op",
        """
        pub fn portable_sub(a: &Tensor<f32>, b: &Tensor<f32>, rt: &CubeRuntime) -> Result<Tensor<f32>> {
            let out = dispatch_binary!(rt, kernels::run_sub, &a.to_vec(), &b.to_vec());
            from_vec(out, a.shape())
        }
        pub fn run_sub<R: Runtime>(client: &ComputeClient<R>, a: &[f32], b: &[f32]) -> Vec<f32> {
            let a_handle = client.create_from_slice(f32::as_bytes(a));
            let b_handle = client.create_from_slice(f32::as_bytes(b));
            let out = client.empty(a.len() * 4);
            unsafe { kernel_sub::launch_unchecked::<f32, R>(client, count, dim, a_handle, b_handle, out) };
            f32::from_bytes(&client.read_one(out)).to_vec()
        }
        """,
    ),
    "disabled-gpu-test: #[ignore] on a CUDA test": (
        "disabled-gpu-test",
        """
        #[test]
        #[ignore = "needs a GPU"]
        fn cuda_add_matches_cpu() {
            let dev = CudaDevice::new(0).unwrap();
            assert_eq!(gpu_add(&dev).len(), 4);
        }
        """,
    ),
    "disabled-gpu-test: early return when the env var is missing": (
        "disabled-gpu-test",
        """
        #[test]
        fn gpu_softmax_rows_sum_to_one() {
            if std::env::var("CUDA_TESTS").is_err() {
                return;
            }
            let dev = CudaDevice::new(0).unwrap();
            assert!(gpu_softmax(&dev).is_ok());
        }
        """,
    ),
    "disabled-gpu-test: Err(_) => return on the device": (
        "disabled-gpu-test",
        """
        #[test]
        fn gpu_gemm_small() {
            let dev = match CudaDevice::new(0) {
                Ok(d) => d,
                Err(_) => return,
            };
            assert!(gpu_gemm(&dev).is_ok());
        }
        """,
    ),
    "disabled-gpu-test: the GPU part only under a device probe": (
        "disabled-gpu-test",
        """
        #[test]
        fn to_device_round_trip() {
            let x = Tensor::from(1).to_device(Device::Cpu);
            assert_eq!(x.device(), Device::Cpu);
            if tch::Cuda::device_count() > 0 {
                let x = Tensor::from(1).to_device(Device::Cuda(0));
                assert_eq!(x.device(), Device::Cuda(0));
            }
        }
        """,
    ),
    "disabled-gpu-test: its only check compares with NaN": (
        "disabled-gpu-test",
        """
        #[test]
        fn gpu_erf_runs() {
            let dev = CudaDevice::new(0).unwrap();
            for e in gpu_erf(&dev).unwrap() {
                assert_ne!(e, f32::NAN);
            }
        }
        """,
    ),
    "deferred-kernel: an assertion whose message defers the other modes": (
        "deferred-kernel",
        """
        pub fn gpu_rope_inplace(x: &mut CudaSlice<f32>, mode: RopeMode) -> Result<(), GpuError> {
            assert!(mode == RopeMode::Llama, "TODO: only support Llama mode yet");
            launch_rope(x)
        }
        """,
    ),
    "shape-bypass: dtype gate sends everything but f32 to the host": (
        "shape-bypass",
        """
        pub fn add_(&self, other: &Tensor) -> Result<(), Error> {
            if self.is_cuda() && other.is_cuda() && self.dtype() == DType::F32 {
                return backend().add_f32(self, other);
            }
            let mut a = self.data_vec()?;
            let b = other.data_vec()?;
            for (x, y) in a.iter_mut().zip(b.iter()) { *x += y; }
            self.set_data(a)
        }
        """,
    ),
    "shape-bypass: a size threshold kept in a constant sends small inputs to the host": (
        "shape-bypass",
        """
        const FFT_GPU_MIN_LOG_SIZE: u32 = 14;
        pub fn gpu_fft(input: &[u64], state: &MetalState) -> Result<Vec<u64>, MetalError> {
            let order = input.len().trailing_zeros();
            if order < FFT_GPU_MIN_LOG_SIZE {
                return Ok(fft_cpu(input));
            }
            let buffer = state.alloc_buffer_data(input);
            state.dispatch_thread_groups(&buffer);
            Ok(state.read(&buffer))
        }
        """,
    ),
    "shape-bypass: the GPU function's small case is its namesake without the backend word": (
        "shape-bypass",
        """
        pub fn evaluate_gpu(coeffs: Vec<u64>, state: &MetalState) -> Result<Vec<u64>, MetalError> {
            if coeffs.len() < 1024 {
                return Ok(evaluate(coeffs));
            }
            let buffer = state.alloc_buffer_data(&coeffs);
            state.dispatch_thread_groups(&buffer);
            Ok(state.read(&buffer))
        }
        pub fn evaluate(coeffs: Vec<u64>) -> Vec<u64> {
            coeffs.iter().map(|c| c * 3).collect()
        }
        """,
    ),
    "shape-bypass: one arm of a dtype match computes on the host backend and uploads": (
        "shape-bypass",
        """
        impl MetalDevice {
            fn ones_impl(&self, shape: &Shape, dtype: DType) -> Result<MetalStorage> {
                let name = match dtype {
                    DType::F32 => "fill_f32",
                    DType::F16 => "fill_f16",
                    DType::F64 => {
                        let host = CpuDevice.ones_impl(shape, dtype)?;
                        return self.storage_from_cpu_storage(&host);
                    }
                };
                let buffer = self.new_buffer(shape.elem_count(), dtype)?;
                candle_metal_kernels::call_const_fill(&self.device, name, &buffer)?;
                Ok(MetalStorage::new(buffer))
            }
        }
        impl CpuDevice {
            fn ones_impl(&self, shape: &Shape, dtype: DType) -> Result<CpuStorage> {
                Ok(CpuStorage::ones(shape, dtype))
            }
        }
        """,
    ),
    "silent-fallback: helper Ok(None) turned into CPU work": (
        "silent-fallback",
        """
        pub fn gpu_exp(a: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            if let Some(out) = try_launch_unary(a, dev, EXP_PTX)? {
                return Ok(out);
            }
            cpu_fallback_unary(a, dev, |x| x.exp())
        }
        """,
    ),
    "silent-fallback: unwrap_or_else to the CPU routine": (
        "silent-fallback",
        """
        pub fn gpu_matmul(a: &Tensor, b: &Tensor) -> Tensor {
            launch_gemm(a, b).unwrap_or_else(|_| matmul_cpu(a, b))
        }
        """,
    ),
    "silent-fallback: log::warn! then CPU": (
        "silent-fallback",
        """
        pub fn gpu_sort(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            match load_sort_kernel(dev) {
                Ok(k) => launch_sort(k, x, dev),
                Err(e) => {
                    log::warn!("sort kernel unavailable: {e}");
                    cpu_to_gpu(&sort_cpu(&gpu_to_cpu(x, dev)?), dev)
                }
            }
        }
        """,
    ),
    "fallback-without-warn: log::warn! inside the opt-in gate": (
        "fallback-without-warn",
        """
        pub fn gpu_erf(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            match get_or_compile(ERF_PTX, "erf") {
                Ok(k) => launch_erf(k, x, dev),
                Err(e) => {
                    if std::env::var("FERROTORCH_ENABLE_GPU_FALLBACK").is_ok() {
                        log::warn!("erf: falling back to CPU");
                        return cpu_to_gpu(&erf_cpu(&gpu_to_cpu(x, dev)?), dev);
                    }
                    Err(GpuError::PtxCompileFailed { kernel: "erf", source: e })
                }
            }
        }
        """,
    ),
    "stub-residue: TODO over the GPU path": (
        "stub-residue",
        """
        /// TODO: GPU path
        pub fn gpu_topk(x: &CudaSlice<f32>, k: usize) -> Result<CudaSlice<f32>, GpuError> {
            launch_sort_then_slice(x, k)
        }
        """,
    ),
    "cpu-detour: round trip in device-agnostic code": (
        "cpu-detour",
        """
        pub fn clip_grad_value_(params: &[Tensor], clip: f32) -> Result<(), Error> {
            for p in params {
                let g = p.grad().data_vec()?;
                let clipped: Vec<f32> = g.iter().map(|v| v.clamp(-clip, clip)).collect();
                p.set_grad(Tensor::from_vec(clipped).to(p.device())?);
            }
            Ok(())
        }
        """,
    ),
}

# GPU by nothing but where it lives: no GPU name, no GPU types.
HOST_ROUND_TRIP_NO_GPU_TYPES = """
    pub fn softplus(x: &Buffer, dev: &Device) -> Result<Buffer, Error> {
        let host = gpu_to_cpu(x, dev)?;
        let mut out = Vec::new();
        for v in host.iter() { out.push((1.0 + v.exp()).ln()); }
        cpu_to_gpu(&out, dev)
    }
    """

LEGITIMATE = {
    "a GPU test that checks values, and for NaN with is_nan": """
        #[test]
        fn gpu_erf_matches_reference() {
            let dev = CudaDevice::new(0).expect("this test needs a CUDA device");
            let out = gpu_erf(&dev).unwrap();
            assert_ne!(out.len(), 0);
            for (e, r) in out.iter().zip(erf_reference()) {
                assert!(!e.is_nan());
                assert!((e - r).abs() < 1e-5, "erf off by {}", e - r);
            }
        }
        """,
    "an assertion of GPU code that guards its input": """
        pub fn gpu_rope_inplace(x: &mut CudaSlice<f32>, dims: usize) -> Result<(), GpuError> {
            assert!(dims % 2 == 0, "rope needs an even number of dimensions");
            launch_rope(x)
        }
        """,
    "a predicate, statistics and a synchronize loop, each named after the GPU": """
        impl StepSubmission {
            pub fn cuda_has_tail(&self) -> bool { has_tail(&self.steps) }
        }
        impl LoraArena {
            pub fn cuda_stats(&self) -> ArenaStats { stats(&self.slots) }
        }
        pub fn synchronize_cuda_contexts(devices: &[Device]) -> Result<()> {
            for device in devices.iter() {
                if let Device::Cuda(cuda) = device { cuda.stream().context().synchronize()?; }
            }
            Ok(())
        }
        fn has_tail(steps: &[Step]) -> bool { steps.iter().any(|s| s.tail) }
        fn stats(slots: &[Slot]) -> ArenaStats { ArenaStats { used: slots.iter().filter(|s| s.used).count() } }
        """,
    "placing a layer's weights on a device is placement, not an op": """
        impl NcclDeviceMapper {
            fn cast_nm_device(&self, x: &Tensor, loading_isq: bool) -> Result<Tensor> {
                if loading_isq { x.to_device(&Device::Cpu) } else { x.to_device(&self.nm_device) }
            }
        }
        """,
    "set-up named after the GPU walks its devices and shapes on the host": """
        pub fn cuda_devices(config: &Config) -> Vec<usize> {
            let mut out = Vec::new();
            for (i, d) in config.devices.iter().enumerate() { if d.enabled { out.push(i); } }
            out
        }
        pub fn build_metal_size_for_shape(shape: &[usize]) -> MTLSize {
            let mut n = 1;
            for d in shape.iter() { n *= d; }
            MTLSize { width: n as u64, height: 1, depth: 1 }
        }
        """,
    "a predicate on the device type computes nothing": """
        impl Device {
            pub fn is_cuda(self) -> bool {
                match self {
                    Device::Cuda(_) => true,
                    Device::Cpu | Device::Mps => false,
                }
            }
        }
        """,
    "a dtype the kernels lack gets a structured error": """
        impl MetalDevice {
            fn ones_impl(&self, shape: &Shape, dtype: DType) -> Result<MetalStorage> {
                let name = match dtype {
                    DType::F32 => "fill_f32",
                    DType::F64 => return Err(MetalError::UnsupportedDType { op: "ones", dtype }),
                };
                let buffer = self.new_buffer(shape.elem_count(), dtype)?;
                candle_metal_kernels::call_const_fill(&self.device, name, &buffer)?;
                Ok(MetalStorage::new(buffer))
            }
        }
        """,
    "composite op from device-dispatched primitives": """
        pub fn gpu_var(x: &Tensor) -> Result<Tensor, Error> {
            let mean = x.mean()?;
            let centered = x.sub(&mean)?;
            centered.mul(&centered)?.mean()
        }
        """,
    "one-time setup uploading host weights": """
        pub fn new(weights: &[f32], dev: &GpuDevice) -> GpuResult<Self> {
            let init: Vec<f32> = weights.iter().map(|w| w * 0.5).collect();
            Ok(Self { buf: cpu_to_gpu(&init, dev)? })
        }
        """,
    "readback is the purpose: gpu_to_cpu and to_vec": """
        pub fn gpu_to_cpu(buf: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<Vec<f32>> {
            dev.stream().memcpy_dtov(buf.inner())
        }
        pub fn to_vec(t: &GpuTensor) -> GpuResult<Vec<f32>> {
            gpu_to_cpu(&t.buf, &t.dev)
        }
        """,
    "Display impl reads back to print": """
        impl std::fmt::Display for GpuTensor {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                let host = self.cpu().map_err(|_| std::fmt::Error)?;
                write!(f, "{:?}", host)
            }
        }
        """,
    "cfg(not(cuda)) item returning the structured no-CUDA error": """
        #[cfg(not(feature = "cuda"))]
        pub fn gpu_add(_a: &[f32], _b: &[f32]) -> Result<Vec<f32>, GpuError> {
            Err(GpuError::NoCuda)
        }
        """,
    "CLI where the user chose the CPU": """
        fn main() {
            let args = Args::parse();
            let device = if args.cpu {
                eprintln!("running on the CPU as requested");
                Device::Cpu
            } else {
                Device::new_cuda(0).expect("no CUDA device")
            };
            run(device);
        }
        """,
    "canonical opt-in fallback with tracing::warn!": """
        pub fn gpu_layernorm(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            let kernel = match get_or_compile(LN_PTX, "layernorm") {
                Ok(k) => k,
                Err(e) => {
                    if std::env::var("FERROTORCH_ENABLE_GPU_FALLBACK").is_ok() {
                        tracing::warn!(
                            target: "ferrotorch::gpu_fallback",
                            kernel = "layernorm",
                            "PTX compile failed; falling back to CPU. Unset FERROTORCH_ENABLE_GPU_FALLBACK to make this an error instead.",
                        );
                        return cpu_to_gpu(&cpu_layernorm(&gpu_to_cpu(x, dev)?), dev);
                    }
                    return Err(GpuError::PtxCompileFailed { kernel: "layernorm" });
                }
            };
            launch_layernorm(kernel, x, dev)
        }
        """,
    "GPU-to-GPU fallback: vec4 kernel, then the scalar kernel": """
        pub fn gpu_add(a: &CudaBuffer<f32>, b: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            match launch_add_vec4(a, b, dev) {
                Ok(out) => Ok(out),
                Err(_) => launch_add_scalar(a, b, dev),
            }
        }
        fn launch_add_scalar(a: &CudaBuffer<f32>, b: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            let f = dev.get_func("add", "add_f32").unwrap();
            unsafe { f.launch(LaunchConfig::for_num_elems(a.len() as u32), (a, b)) }
        }
        """,
    "device dispatch routing CPU tensors to CPU code": """
        pub fn relu(t: &Tensor) -> Result<Tensor, Error> {
            if t.is_cuda() {
                return backend().relu_f32(t);
            }
            let data = t.data_vec()?;
            Ok(Tensor::from_vec(data.iter().map(|v| v.max(0.0)).collect()))
        }
        """,
    "sampler index read back for the host": """
        pub fn gpu_argmax(logits: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<usize> {
            let idx = launch_argmax(logits, dev)?;
            let host = gpu_to_cpu(&idx, dev)?;
            Ok(host[0] as usize)
        }
        """,
    "ignored test that is not a GPU test": """
        #[test]
        #[ignore = "slow: parses the whole vocabulary"]
        fn tokenizer_roundtrip() {
            assert_eq!(roundtrip("hello"), "hello");
        }
        """,
    "a device probe whose else fails the test": """
        #[test]
        fn to_device_round_trip() {
            if tch::Cuda::is_available() {
                let x = Tensor::from(1).to_device(Device::Cuda(0));
                assert_eq!(x.device(), Device::Cuda(0));
            } else {
                panic!("this test needs a CUDA device");
            }
        }
        """,
    "a GPU device built outside the probe too": """
        #[test]
        fn to_device_round_trip() {
            let x = Tensor::from(1).to_device(Device::Cuda(0));
            assert_eq!(x.device(), Device::Cuda(0));
            if tch::Cuda::device_count() > 1 {
                let y = Tensor::from(1).to_device(Device::Cuda(1));
                assert_eq!(y.device(), Device::Cuda(1));
            }
        }
        """,
    "a dtype TODO in the docs of a function that returns a typed error for that dtype": """
        /// Runs when the dtype is not bf16 (TODO maybe template this kernel for bf16 too?)
        pub fn gpu_attention(x: &CudaSlice<f32>, dtype: DType, dev: &GpuDevice) -> Result<CudaSlice<f32>, GpuError> {
            let name = match dtype {
                DType::F16 => "attention_f16",
                DType::F32 => "attention_f32",
                DType::BF16 => return Err(GpuError::HeadDTypeMismatch { got: dtype }),
            };
            launch_attention(dev, name, x)
        }
        """,
    "TODO text inside a structured error message": """
        pub fn gpu_fft(x: &CudaSlice<f32>) -> Result<CudaSlice<f32>, GpuError> {
            Err(GpuError::Unsupported { op: "fft (TODO: cuFFT plan cache)", device: "cuda" })
        }
        """,
}


@pytest.mark.parametrize(("rule", "code"), list(VIOLATIONS.values()), ids=list(VIOLATIONS))
def test_violation_is_flagged(rule: str, code: str) -> None:
    path = "kernels-gpu/src/ops.rs" if "located" in code or "-gpu crate" in rule else "src/lib.rs"
    found = run_analysis({path: code}).findings
    assert rule in {f.rule for f in found}, [(f.rule, f.message) for f in found]


def test_location_makes_gpu_code() -> None:
    code = HOST_ROUND_TRIP_NO_GPU_TYPES
    assert "fake-gpu-function" in rules_found(code, path="mylib-gpu/src/ops.rs")
    assert "fake-gpu-function" not in rules_found(code, path="mylib/src/ops.rs")


def test_a_procedural_macro_crate_is_not_gpu_code() -> None:
    """`cubecl-macros` generates launch code inside the compiler: its `unimplemented!()`
    for an unsupported syntax and its loops over arguments are no GPU work of its own."""
    code = """
    pub fn launch_arg_where(fields: &[Field]) -> TokenStream {
        let mut out = Vec::new();
        for f in fields.iter() { out.push(quote![#f: LaunchArg]); }
        match fields.len() { 0 => unimplemented!("empty launch"), _ => quote![#(#out),*] }
    }
    """
    assert rules_found(code, path="crates/cubecl-macros/src/launch.rs") == set()
    assert rules_found(code, path="crates/cubecl-cuda/src/launch.rs") != set()


def test_reading_back_is_what_to_host_is_for() -> None:
    """tract's `CudaTensor::to_host` copies the buffer back in the `else` of an
    exotic-layout test: that branch is the function's job, not a CPU fallback."""
    code = """
    impl CudaTensor {
        fn to_host(&self) -> TractResult<Arc<Tensor>> {
            with_cuda_stream(|stream| {
                let t: Tensor = if let Some(fact) = &self.exotic_fact {
                    let mut blob = Blob::new_for_size(self.buffer.len());
                    stream.memcpy_dtoh(&self.buffer.inner, blob.as_bytes_mut())?;
                    decode_blocks(fact, blob)?
                } else {
                    let mut tensor = Tensor::uninitialized(self.datum_type, &self.shape)?;
                    stream.memcpy_dtoh(&self.buffer.inner, tensor.as_bytes_mut())?;
                    tensor
                };
                Ok(Arc::new(t))
            })
        }
    }
    """
    assert "silent-fallback" not in rules_found(code, path="cuda/src/tensor.rs")


def test_configured_gpu_paths_count_as_location() -> None:
    code = HOST_ROUND_TRIP_NO_GPU_TYPES
    assert "fake-gpu-function" not in rules_found(code, path="accel/src/ops.rs")
    config = RepoConfig(gpu_paths=("accel/**",))
    assert "fake-gpu-function" in rules_found(code, path="accel/src/ops.rs", config=config)


@pytest.mark.parametrize("code", list(LEGITIMATE.values()), ids=list(LEGITIMATE))
def test_legitimate_case_is_clean(code: str) -> None:
    found = run_analysis({"src/lib.rs": code}).findings
    assert found == [], [(f.rule, f.message) for f in found]


def test_finding_carries_location_function_and_fix() -> None:
    code = VIOLATIONS["silent-fallback: log::warn! then CPU"][1]
    (finding,) = [f for f in run_analysis({"src/ops.rs": code}).findings if f.rule == "silent-fallback"]
    assert finding.path == "src/ops.rs"
    assert finding.function == "gpu_sort"
    assert finding.line == 5  # the Err(e) arm (the dedented snippet starts with a blank line)
    assert "sort_cpu" in finding.message and "Err(GpuError" in finding.message
    assert "does not make it opt-in" in finding.message


def test_evidence_is_followed_through_callees_across_files() -> None:
    files = {
        "core/src/ops.rs": """
            pub fn gpu_scale(x: &Tensor) -> Result<Tensor, Error> {
                let host = x.data_vec()?;
                scale_impl(x, &host)
            }
            """,
        "core/src/impls.rs": """
            pub fn scale_impl(x: &Tensor, _h: &[f32]) -> Result<Tensor, Error> {
                let f = x.dev.get_func("scale", "scale_f32").unwrap();
                unsafe { f.launch(cfg(x), (x,)) }
            }
            """,
    }
    found = {f.rule for f in run_analysis(files).findings}
    assert "fake-gpu-function" not in found


def test_a_macro_the_file_defines_calls_what_it_writes_out_where_it_is_invoked() -> None:
    from app.checks.rust_index import extract

    code = b"""
        macro_rules! dispatch_scale {
            ($rt:expr, $launcher:path, $x:expr) => {{
                match $rt.client() {
                    Client::Cuda(c) => kernels::run_scale(c, $x),
                    Client::Wgpu(c) => $launcher(c, $x),
                }
            }};
        }
        pub fn portable_scale(rt: &Runtime, x: &[f32]) -> Vec<f32> {
            let n = x.len();
            dispatch_scale!(rt, kernels::run_fallback, x)
        }
        """
    (scale,) = extract(code).functions
    calls = [(c.qualifier, c.name) for c in scale.calls]
    # `$launcher(..)` is a metavariable: the path handed in is the call
    assert calls == [("", "len"), ("", "client"), ("kernels", "run_scale"), ("kernels", "run_fallback")]
    assert all(c.offset == scale.text.index(b"dispatch_scale!") for c in scale.calls[1:3])


def test_a_function_a_template_writes_out_does_not_expand_the_macros_it_invokes() -> None:
    from app.checks.rust_index import extract

    code = b"""
        macro_rules! upload {
            ($x:expr) => {{ host_copy($x) }};
        }
        macro_rules! define_portable {
            ($name:ident) => {
                pub fn $name(x: &[f32]) -> Vec<f32> { upload!(x) }
            };
        }
        """
    (template,) = extract(code).functions
    # `$name` is unbound where the template is written: `upload!` is expanded where it is used
    assert template.name == "_name"
    assert template.calls == []


RUN_SCALE = """
    pub fn run_scale(dev: &CudaDevice, x: &[f32]) -> Vec<f32> {
        let f = dev.get_func("k", "scale").unwrap();
        let buf = dev.htod_copy(x.to_vec()).unwrap();
        unsafe { f.launch(LaunchConfig::for_num_elems(4), (&buf,)) }.unwrap();
        dev.dtoh_sync_copy(&buf).unwrap()
    }
    """


def test_a_gpu_test_reaches_a_kernel_through_a_dispatch_macro() -> None:
    files = {
        "src/ops.rs": """
            macro_rules! dispatch_scale {
                ($rt:expr, $x:expr) => {{
                    match $rt.client() {
                        Client::Cuda(c) => kernels::run_scale(c, $x),
                    }
                }};
            }
            pub fn portable_scale(rt: &Runtime, x: &[f32]) -> Vec<f32> {
                dispatch_scale!(rt, x)
            }
            """,
        "src/kernels.rs": RUN_SCALE,
        "tests/gpu.rs": """
            #[test]
            fn scale_on_cuda() {
                let rt = Runtime::new(CudaDevice::new(0).expect("needs CUDA"));
                assert_eq!(portable_scale(&rt, &[1.0]), vec![2.0]);
            }
            """,
    }
    untested = {
        f.function for f in run_analysis(files, diff_all=True).findings if f.rule == "gpu-code-without-test"
    }
    assert "run_scale" not in untested


@pytest.mark.parametrize(("skipped_on", "reached"), [("cuda", False), ("cpu", True)])
def test_a_test_helper_that_returns_at_once_on_its_backend_reaches_nothing_there(
    skipped_on: str, reached: bool
) -> None:
    files = {
        "src/kernels.rs": RUN_SCALE,
        "tests/scale.rs": f"""
            fn scale(device: &Device) -> Result<()> {{
                // TODO enable once the kernel lands.
                if device.is_{skipped_on}() {{
                    return Ok(());
                }}
                assert_eq!(run_scale(device.as_cuda(), &[1.0]), vec![2.0]);
                Ok(())
            }}
            #[test]
            fn scale_cuda() -> Result<()> {{
                scale(&Device::new_cuda(0)?)
            }}
            """,
    }
    untested = {
        f.function for f in run_analysis(files, diff_all=True).findings if f.rule == "gpu-code-without-test"
    }
    assert ("run_scale" not in untested) is reached


def test_evidence_does_not_flow_through_a_method_name_defined_on_many_types() -> None:
    # `shape` is a method of seven types, one of which launches: a call to `.shape()`
    # could be any of them, so it makes the round trip below no GPU work.
    shapes = (
        "".join(f"impl T{i} {{ pub fn shape(&self) -> usize {{ self.0 }} }}\n" for i in range(6))
        + """
        impl Launcher {
            pub fn shape(&self) -> usize {
                unsafe { self.f.launch(cfg(), (self.n,)) }.unwrap();
                self.n
            }
        }
        """
    )
    files = {
        "core/src/shapes.rs": shapes,
        "core/src/ops.rs": """
            pub fn gpu_scale(x: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
                let n = x.shape();
                let host = gpu_to_cpu(x, dev)?;
                cpu_to_gpu(&host.iter().map(|v| v * n as f32).collect::<Vec<f32>>(), dev)
            }
            """,
    }
    assert "fake-gpu-function" in {f.rule for f in run_analysis(files).findings}


def test_a_warning_field_that_names_the_op_names_the_kernel() -> None:
    code = """
        pub fn gpu_allreduce(t: &CudaBuffer<f32>, dev: &GpuDevice) -> GpuResult<CudaBuffer<f32>> {
            match get_or_compile(ALLREDUCE_PTX, "ring") {
                Ok(k) => launch_ring(k, t, dev),
                Err(e) => {
                    if std::env::var("FERROTORCH_ENABLE_GPU_FALLBACK").is_ok() {
                        tracing::warn!(collective = %NAME, "host round trip; unset FERROTORCH_ENABLE_GPU_FALLBACK");
                        return cpu_to_gpu(&allreduce_cpu(&gpu_to_cpu(t, dev)?), dev);
                    }
                    Err(GpuError::PtxCompileFailed { source: e })
                }
            }
        }
        """
    assert "fallback-without-warn" in rules_found(code)
    named = code.replace("collective = %NAME", 'collective = "allreduce"')
    assert "fallback-without-warn" not in rules_found(named)


def test_severity_can_be_changed_or_switched_off() -> None:
    code = VIOLATIONS["stub-residue: TODO over the GPU path"][1]
    raised = run_analysis({"src/lib.rs": code}, RepoConfig(severities={"stub-residue": "error"}))
    assert [str(f.severity) for f in raised.findings] == ["error"]
    off = run_analysis({"src/lib.rs": code}, RepoConfig(severities={"stub-residue": "off"}))
    assert off.findings == []


def test_gpu_code_without_test_only_in_diff_mode_and_satisfied_by_a_gpu_test() -> None:
    kernel = """
        pub fn gpu_scale(x: &CudaSlice<f32>, dev: &CudaDevice) -> Result<(), GpuError> {
            let f = dev.get_func("k", "scale").unwrap();
            unsafe { f.launch(LaunchConfig::for_num_elems(4), (x,)) }?;
            Ok(())
        }
        """
    assert "gpu-code-without-test" not in {f.rule for f in run_analysis({"src/lib.rs": kernel}).findings}
    untested = run_analysis({"src/lib.rs": kernel}, diff_all=True).findings
    assert "gpu-code-without-test" in {f.rule for f in untested}
    test = """
        #[test]
        fn scale_on_cuda() {
            let dev = CudaDevice::new(0).expect("needs CUDA");
            let x = dev.htod_copy(vec![1.0f32; 4]).unwrap();
            gpu_scale(&x, &dev).unwrap();
        }
        """
    tested = run_analysis({"src/lib.rs": kernel, "tests/gpu.rs": test}, diff_all=True).findings
    assert "gpu-code-without-test" not in {f.rule for f in tested}


def test_index_knows_crate_module_impl_and_trait() -> None:
    from app.checks.rust_index import extract
    from app.checks.workspace import SourceFile, Workspace

    code = b"""
        impl GradFn for MulBackward { fn backward(&self) {} }
        mod inner { pub fn helper() {} }
        """
    ws = Workspace([SourceFile("ferro-core/src/ops/mul.rs", extract(code))], RepoConfig())
    backward, helper = ws.functions
    assert (backward.crate, backward.module, backward.fn.impl_type, backward.fn.trait) == (
        "ferro-core",
        "ops::mul",
        "MulBackward",
        "GradFn",
    )
    assert (helper.module, helper.fn.qualname) == ("ops::mul::inner", "helper")


@pytest.mark.parametrize(
    ("call", "qualifier"),
    [
        ("Scaler::<f32>::run(1)", "Scaler"),
        ("Cache::<Vec<u8>, usize>::run(1)", "Cache"),
        ("ops::Scaler::<f32>::run(1)", "ops::Scaler"),
        ("<T as Float>::run(1)", "Float"),  # the fully-qualified syntax: the trait's method
        ("<<F as Field>::Config as Ntt<F>>::run(1)", "Ntt"),
        ("<Vec<u8>>::run(1)", ""),
        ("x.run::<f32>(1)", ""),
        # a tuple or closure type among the generic arguments: still one call
        ("run::<R, (F, f16, f32), Alg>(1)", ""),
        ("Launcher::<(F, F), fn(u32) -> u32>::run(1)", "Launcher"),
    ],
)
def test_a_call_through_a_turbofish_is_qualified_by_its_type(call: str, qualifier: str) -> None:
    from app.checks.rust_index import extract

    (fn,) = extract(f"fn t() {{ {call}; }}".encode()).functions
    assert [(c.name, c.qualifier) for c in fn.calls] == [("run", qualifier)]


def test_code_after_a_cuda_branch_that_always_returns_is_cpu_only() -> None:
    code = """
        impl GradFn for GatherBackward {
            fn backward(&self, grad: &Tensor) -> Result<Vec<Tensor>, Error> {
                if grad.is_cuda() {
                    if grad.dtype() == DType::F32 {
                        return Ok(vec![backend().gather_backward_f32(grad)?]);
                    }
                    return Err(Error::NotImplementedOnCuda { op: "gather backward" });
                }
                let g = grad.data_vec()?;
                Ok(vec![Tensor::from_vec(scatter_host(&g))])
            }
        }
        """
    assert run_analysis({"src/lib.rs": code}).findings == []


def test_functions_a_macro_rules_body_defines_are_indexed_where_they_are_written() -> None:
    from app.checks.rust_index import extract

    code = b"""macro_rules! impl_kernels {
    ($T:ty, $name:ident) => {
        impl Kernel<$T> for Cuda {
            fn forward(&self, x: &Tensor<$T>) -> Result<Tensor<$T>, Error> {
                $( let _ = $extra; )*
                unsafe { self.func.launch(cfg, (x,)) }?;
                Ok(x.clone())
            }
        }
    };
}
macro_rules! plus_one { ($x:expr) => { $x + 1 }; }
fn after() { helper(); }
macro_rules! testgen_forward { () => { #[test] fn forward_runs() { check::<TestRuntime>(); } }; }
"""
    facts = extract(code)
    forward, after = facts.functions
    assert (forward.name, forward.impl_type, forward.trait, forward.line) == ("forward", "Cuda", "Kernel", 4)
    assert [s.kind for s in forward.signals] == ["launch"]
    assert (after.name, after.line, [c.name for c in after.calls]) == ("after", 13, ["helper"])
    assert facts.syntax_errors == []  # an expression-shaped macro body is not an error of the file
    # A test a macro body writes is a template: the device it runs on is the expander's.
    assert "forward_runs" not in {fn.name for fn in facts.functions}


def test_a_violation_inside_a_macro_rules_body_is_flagged() -> None:
    code = """
        macro_rules! impl_softplus {
            ($T:ty) => {
                pub fn gpu_softplus(x: &CudaBuffer<$T>, dev: &GpuDevice) -> GpuResult<CudaBuffer<$T>> {
                    let host = gpu_to_cpu(x, dev)?;
                    let out: Vec<$T> = host.iter().map(|v| (1.0 + v.exp()).ln()).collect();
                    cpu_to_gpu(&out, dev)
                }
            };
        }
        """
    assert "fake-gpu-function" in rules_found(code)


def test_a_module_path_picks_the_definition_of_that_module() -> None:
    # Both files define `fft`; `crate::fft::cpu::ops::fft` is the host one, so the size
    # branch of the Metal `fft` sends small inputs to the CPU.
    files = {
        "src/fft/cpu/ops.rs": "pub fn fft(input: &[u64]) -> Vec<u64> { input.iter().map(|x| x * 2).collect() }\n",
        "src/fft/gpu/metal/ops.rs": """
            pub fn fft(input: &[u64], state: &MetalState) -> Result<Vec<u64>, MetalError> {
                if input.len() < 4096 {
                    return Ok(crate::fft::cpu::ops::fft(input));
                }
                let buffer = state.alloc_buffer_data(input);
                state.dispatch_thread_groups(&buffer);
                Ok(state.read(&buffer))
            }
            """,
    }
    found = run_analysis(files).findings
    assert [(f.rule, f.path) for f in found if f.rule == "shape-bypass"] == [
        ("shape-bypass", "src/fft/gpu/metal/ops.rs")
    ], [(f.rule, f.message) for f in found]


# A runtime's server, written to by generic client code and built where the walk does
# not see it (a registry): cubecl's `ComputeClient<R::Server>` over `CudaServer`.
GENERIC_CLIENT = {
    "crates/rt-core/src/client.rs": """
        pub trait Runtime {
            type Server: Server;
            fn client() -> Client<Self::Server>;
        }
        pub trait Server {
            fn write(&mut self, data: &[f32]);
        }
        pub struct Client<S> {
            server: S,
        }
        impl<S: Server> Client<S> {
            pub fn create(&mut self, data: &[f32]) {
                self.server.write(data);
            }
        }
        """,
    "crates/rt-cuda/src/server.rs": """
        pub struct CudaServer {
            dev: CudaDevice,
        }
        impl Server for CudaServer {
            fn write(&mut self, data: &[f32]) {
                run_scale(&self.dev, data);
            }
        }
        pub struct CudaRuntime;
        impl Runtime for CudaRuntime {
            type Server = CudaServer;
            fn client() -> Client<CudaServer> {
                registry::client_of("cuda")
            }
        }
        """,
    "crates/rt-cuda/src/kernels.rs": RUN_SCALE,
}


def test_a_gpu_test_reaches_the_server_its_runtime_binds_through_generic_code() -> None:
    files = {
        **GENERIC_CLIENT,
        "crates/rt-cuda/src/lib.rs": """
            #[cfg(test)]
            mod tests {
                pub type TestRuntime = crate::CudaRuntime;
                #[test]
                fn cuda_create() {
                    let mut client = TestRuntime::client();
                    client.create(&[1.0]);
                }
            }
            """,
    }
    untested = {
        f.function for f in run_analysis(files, diff_all=True).findings if f.rule == "gpu-code-without-test"
    }
    assert "CudaServer::write" not in untested
    assert "run_scale" not in untested


def test_a_trait_default_method_called_on_a_type_runs_that_types_methods() -> None:
    # cubecl's C++ dialect: `IsNan::format(..)` runs `Unary::format`, a default method
    # whose `Self::format_scalar(..)` is `IsNan`'s; the unit struct is never built.
    files = {
        "crates/gen/src/unary.rs": """
            pub trait Unary {
                fn format(out: &mut String) {
                    out.push_str("y = ");
                    Self::format_scalar(out);
                }
                fn format_scalar(out: &mut String);
            }
            pub struct IsNan;
            impl Unary for IsNan {
                fn format_scalar(out: &mut String) {
                    out.push_str("isnan(x)");
                }
            }
            pub struct IsInf;
            impl Unary for IsInf {
                fn format_scalar(out: &mut String) {
                    out.push_str("isinf(x)");
                }
            }
            """,
        "crates/gen/src/launch.rs": """
            pub fn run_isnan(dev: &CudaDevice, x: &[f32]) -> Vec<f32> {
                let mut src = String::new();
                IsNan::format(&mut src);
                let f = dev.compile_and_get(&src, "isnan").unwrap();
                let buf = dev.htod_copy(x.to_vec()).unwrap();
                unsafe { f.launch(LaunchConfig::for_num_elems(4), (&buf,)) }.unwrap();
                dev.dtoh_sync_copy(&buf).unwrap()
            }
            #[cfg(test)]
            mod tests {
                #[test]
                fn isnan_on_cuda() {
                    let dev = CudaDevice::new(0).unwrap();
                    assert_eq!(super::run_isnan(&dev, &[1.0]), vec![0.0]);
                }
            }
            """,
    }
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    ws = Workspace(sources, RepoConfig())
    reach = gpu_tests.gpu_test_reach(ws)
    reached = {f.fn.qualname for f in ws.functions if id(f) in reach}
    assert {"format", "IsNan::format_scalar"} <= reached, reached  # `format`: the default method
    assert "IsInf::format_scalar" not in reached


def test_a_wgpu_test_of_the_msl_module_runs_metals_code() -> None:
    # cubecl-wgpu's `mod tests_msl`: the same runtime with the MSL compiler, on Metal.
    files = {
        "crates/cpp/src/metal/dialect.rs": """
            pub struct MslDialect;
            impl MslDialect {
                pub fn warp_reduce_sum(out: &mut String) {
                    out.push_str("simd_sum(x)");
                }
            }
            """,
        "crates/rt-wgpu/src/compiler.rs": """
            pub fn run_plane_sum(device: &wgpu::Device) {
                let mut src = String::new();
                MslDialect::warp_reduce_sum(&mut src);
                device.create_shader_module(msl_module(src));
            }
            """,
        "crates/rt-wgpu/src/lib.rs": """
            #[cfg(all(test, feature = "msl"))]
            mod tests_msl {
                #[test]
                fn plane_sum() {
                    let adapter = pollster::block_on(wgpu::Instance::default().request_adapter(&Default::default())).unwrap();
                    let (device, _queue) = pollster::block_on(adapter.request_device(&Default::default(), None)).unwrap();
                    super::compiler::run_plane_sum(&device);
                }
            }
            """,
    }
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    ws = Workspace(sources, RepoConfig())
    reach = gpu_tests.gpu_test_reach(ws)
    assert "MslDialect::warp_reduce_sum" in {f.fn.qualname for f in ws.functions if id(f) in reach}


def test_a_test_names_its_own_crates_runtime_alias() -> None:
    # Each runtime crate has a `TestRuntime`; the CPU crate's test runs on the CPU one,
    # so it neither acquires a GPU nor is a GPU test.
    files = {
        **GENERIC_CLIENT,
        "crates/rt-cuda/src/runtime.rs": """
            impl CudaRuntime {
                pub fn acquire() -> CudaDevice {
                    CudaDevice::new(0).expect("no CUDA device")
                }
            }
            """,
        "crates/rt-cuda/src/lib.rs": "pub type TestRuntime = crate::CudaRuntime;\n",
        "crates/rt-cpu/src/lib.rs": """
            pub struct CpuRuntime;
            impl CpuRuntime {
                pub fn acquire() -> Vec<f32> {
                    Vec::new()
                }
            }
            pub type TestRuntime = crate::CpuRuntime;
            #[test]
            fn creates() {
                let host = TestRuntime::acquire();
                assert!(host.is_empty());
            }
            """,
    }
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    ws = Workspace(sources, RepoConfig())
    test = next(f for f in ws.functions if f.fn.name == "creates")
    assert not gpu_tests.is_gpu_test(test, ws)


def test_a_call_of_a_local_bound_to_a_functions_path_calls_that_function() -> None:
    # cubecl's written-out tests: `let test = runtime_tests::x::test_y::<TestRuntime>;
    # test(client);` calls `test_y`, not the `test` another crate defines (which here
    # acquires a GPU: the CPU runtime's test would be taken for a GPU test).
    files = {
        "crates/rt-core/src/runtime_tests/add.rs": "pub fn test_add(x: &[f32]) -> Vec<f32> { x.to_vec() }\n",
        "crates/rt-wgpu/src/probe.rs": """
            pub async fn test() {
                let adapter = wgpu::Instance::default().request_adapter(&Default::default()).await;
                adapter.expect("no GPU adapter");
            }
            """,
        "crates/rt-cpu/src/lib.rs": """
            #[test]
            fn adds() {
                let test = rt_core::runtime_tests::add::test_add;
                assert_eq!(test(&[1.0]), vec![1.0]);
            }
            """,
    }
    sources = [SourceFile(path, extract(textwrap.dedent(code).encode())) for path, code in files.items()]
    ws = Workspace(sources, RepoConfig())
    test = next(f for f in ws.functions if f.fn.name == "adds")
    assert [f.fn.name for f in ws.resolve(test.fn.calls[-1], test)] == ["test_add"]
    assert not gpu_tests.is_gpu_test(test, ws)


def test_a_runtimes_associated_types_are_in_play_but_not_what_a_std_trait_returns() -> None:
    # `type Server = CudaServer;` says what generic code over `Runtime` runs; `type
    # Target = QTensor;` of a `Deref` only what its method returns.
    facts = extract(
        textwrap.dedent(
            """
            impl Runtime for CudaRuntime {
                type Server = CudaServer;
                type Compiler = CppCompiler<CudaDialect>;
            }
            impl std::ops::Deref for PyQTensor {
                type Target = QTensor;
                fn deref(&self) -> &QTensor { &self.0 }
            }
            """
        ).encode()
    )
    assert facts.associated_types == (
        ("CudaRuntime", "CudaServer"),
        ("CudaRuntime", "CppCompiler"),
        ("CudaRuntime", "CudaDialect"),
    )


def test_a_crates_alias_of_an_alias_defined_elsewhere_stands_for_every_crates() -> None:
    # burn's test templates name `TestTensor`, an alias of the `TestTensor2` each crate
    # writing them out defines: the template's own crate does not say which type it is.
    files = {
        "crates/tensor-tests/src/lib.rs": """
            pub type TestTensor = TestTensor2;
            #[test]
            fn scale_on_cuda() {
                assert_eq!(TestTensor::scale(&[1.0]), vec![2.0]);
            }
            """,
        "crates/cuda-backend/src/lib.rs": """
            pub type TestTensor = CudaTensor;
            impl CudaTensor {
                pub fn scale(x: &[f32]) -> Vec<f32> {
                    run_scale(&CudaDevice::new(0).unwrap(), x)
                }
            }
            """,
        "crates/cuda-backend/src/kernels.rs": RUN_SCALE,
    }
    untested = {
        f.function for f in run_analysis(files, diff_all=True).findings if f.rule == "gpu-code-without-test"
    }
    assert "CudaTensor::scale" not in untested


def test_the_kind_of_tensor_a_backend_method_is_for_is_not_its_op() -> None:
    sources = [
        SourceFile("src/ops.rs", extract(b"impl B { fn int_cumprod(&self) {} fn float_exp(&self) {} }"))
    ]
    ws = Workspace(sources, RepoConfig())
    assert [gpu_tests._op_name(f) for f in ws.functions] == ["cumprod", "exp"]
