"""kerneld for PyTorch: blockwise FP8 training layers whose quantization and GEMMs run on the
node's kerneld daemon, as PyTorch custom ops (torch.ops.kerneld.*, kerneld.torch.ops) that
torch.compile traces without graph breaks.

    from kerneld.torch import convert_to_float8_blockwise
    model = convert_to_float8_blockwise(model)        # the Linears default_filter selects

CUDA tensors go to the daemon by IPC handle with no copies and no host synchronisation; on a
CPU-only node (the daemon's CPU backend) CPU tensors are copied through shared memory. The
process's client connects on first use to $KERNELD_SOCKET (default /run/kerneld/kerneld.sock);
set_default_client() chooses another."""
from . import ops
from ._runtime import Runtime, default_runtime, set_default_client, set_default_runtime
from .linear import (DEFAULT_DGRAD, Float8BlockwiseLinear, Float8BlockwiseLinearConfig,
                     check_linear_shape, convert_all, convert_to_float8_blockwise,
                     default_filter, default_rule, fp8_linear, linear_shape_problem)
from .moe import Float8MoEExperts, grouped_linear, grouped_mm

__all__ = ["DEFAULT_DGRAD", "Float8BlockwiseLinear", "Float8BlockwiseLinearConfig",
           "Float8MoEExperts", "Runtime", "check_linear_shape", "convert_all",
           "convert_to_float8_blockwise", "default_filter", "default_rule", "default_runtime",
           "fp8_linear",
           "grouped_linear", "grouped_mm", "linear_shape_problem", "ops", "set_default_client",
           "set_default_runtime"]
