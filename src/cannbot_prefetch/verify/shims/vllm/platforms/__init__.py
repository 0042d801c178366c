"""The platform a model file asks about: a CPU, no CUDA/ROCm/XPU kernels, eager compile."""


class _Cpu:
    device_type = "cpu"
    device_name = "cpu"
    simple_compile_backend = "eager"

    def is_cuda(self) -> bool:
        return False

    is_rocm = is_xpu = is_cuda_alike = is_tpu = is_out_of_tree = is_cuda

    def is_cpu(self) -> bool:
        return True

    def is_device_capability(self, *_):
        return False

    is_device_capability_family = has_device_capability = is_device_capability

    def current_device(self):
        return "cpu"

    def verify_model_arch(self, *_):
        return None


current_platform = _Cpu()
