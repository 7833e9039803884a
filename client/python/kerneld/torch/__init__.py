"""kerneld for PyTorch: blockwise FP8 training layers whose quantization and GEMMs run on the
node's kerneld daemon.

    from kerneld.torch import convert_to_float8_blockwise
    model = convert_to_float8_blockwise(model)        # every nn.Linear (filter_fn to choose)

CUDA tensors go to the daemon by IPC handle with no copies and no host synchronisation; on a
CPU-only node (the daemon's CPU backend) CPU tensors are copied through shared memory. The
process's client connects on first use to $KERNELD_SOCKET (default /run/kerneld/kerneld.sock);
set_default_client() chooses another."""
from ._runtime import Runtime, default_runtime, set_default_client
from .linear import Float8BlockwiseLinear, check_linear_shape, convert_to_float8_blockwise
from .moe import Float8MoEExperts

__all__ = ["Float8BlockwiseLinear", "Float8MoEExperts", "Runtime", "check_linear_shape",
           "convert_to_float8_blockwise", "default_runtime", "set_default_client"]
