"""A converted Llama under FSDP2, DDP and torch.distributed.checkpoint on the CPU backend: two
gloo ranks, each a process with its own kerneld session on the test's daemon.

Data parallelism over two ranks computes what one process computes on the whole batch: each
rank's tokens are a multiple of 128, so the 1x128 token blocks of the wgrad GEMM fall inside one
rank and hold the same tokens as one process's; only the order of the fp32 sums differs. So the
two-rank run is compared with a one-rank run of the same stack (the same FSDP2 or DDP on a
one-process group): loss per step within 1e-3 relative, and every parameter after training
within 2e-2 relative in norm (a few steps of AdamW amplify last-bit differences of the
gradients).

FSDP2 runs with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32) over fp32 master
weights, and with bf16 parameters and no policy."""
import os
import socket

import pytest

from conftest import require_torch

torch = require_torch(2, 6)
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

import llama  # noqa: E402

STEPS = 3
SEQ = 128
PER_RANK = 2  # sequences: 256 tokens a rank


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(rank, world, port, socket_path):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    import kerneld
    from kerneld.torch import set_default_client
    set_default_client(kerneld.connect(socket_path, name=f"rank{rank}"))


def build(mode, convert=True):
    from kerneld.torch import convert_to_float8_blockwise
    cfg = llama.config("debug", n_layers=2)
    torch.manual_seed(0)
    model = llama.Llama(cfg)
    if mode == "fsdp_bf16_params" or mode == "ddp":
        model = model.to(torch.bfloat16)
    if convert:
        convert_to_float8_blockwise(model, module_filter_fn=lambda m, fqn: fqn != "output")
    if mode.startswith("fsdp"):
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
        kwargs = {}
        if mode == "fsdp_mixed":
            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16,
                                                       reduce_dtype=torch.float32)
        for block in model.layers:
            fully_shard(block, **kwargs)
        fully_shard(model, **kwargs)
    elif mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel
        model = DistributedDataParallel(model)
    return cfg, model


def full_state(model):
    from torch.distributed.tensor import DTensor
    out = {}
    for name, t in model.state_dict().items():
        t = t.full_tensor() if isinstance(t, DTensor) else t
        out[name.replace("module.", "", 1)] = t.detach().float().clone()
    return out


def train_worker(rank, world, port, socket_path, mode, out_dir):
    setup(rank, world, port, socket_path)
    cfg, model = build(mode)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    gen = torch.Generator().manual_seed(42)
    losses = []
    for _ in range(STEPS):
        tokens, targets = llama.synthetic_batch(cfg, 2 * PER_RANK, SEQ, gen)
        share = slice(0, 2 * PER_RANK) if world == 1 else slice(rank * PER_RANK,
                                                               (rank + 1) * PER_RANK)
        loss = llama.loss_fn(model(tokens[share]), targets[share])
        loss.backward()
        opt.step()
        opt.zero_grad()
        reduced = loss.detach().clone()
        dist.all_reduce(reduced)
        losses.append(float(reduced) / world)
    state = full_state(model)
    if rank == 0:
        torch.save({"losses": losses, "state": state}, os.path.join(out_dir, f"{mode}-{world}.pt"))
    dist.destroy_process_group()


def spawn(fn, world, *args):
    mp.spawn(fn, args=(world, free_port(), *args), nprocs=world, join=True)


def rel(a, b) -> float:
    return float((a - b).norm() / b.norm().clamp(min=1e-12))


@pytest.mark.parametrize("mode", ["fsdp_mixed", "fsdp_bf16_params", "ddp"])
def test_two_ranks_train_as_one_process_does(daemon, tmp_path, mode):
    spawn(train_worker, 1, daemon.socket, mode, str(tmp_path))
    spawn(train_worker, 2, daemon.socket, mode, str(tmp_path))
    one = torch.load(tmp_path / f"{mode}-1.pt", weights_only=True)
    two = torch.load(tmp_path / f"{mode}-2.pt", weights_only=True)
    assert one["losses"][-1] < one["losses"][0]
    for a, b in zip(two["losses"], one["losses"]):
        assert abs(a - b) <= 1e-3 * abs(b), (two["losses"], one["losses"])
    assert two["state"].keys() == one["state"].keys()
    for name in one["state"]:
        assert rel(two["state"][name], one["state"][name]) <= 2e-2, name


def checkpoint_worker(rank, world, port, socket_path, out_dir):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    setup(rank, world, port, socket_path)
    cfg, converted = build("fsdp_mixed", convert=True)
    tokens, targets = llama.synthetic_batch(cfg, PER_RANK, SEQ, torch.Generator().manual_seed(rank))
    llama.loss_fn(converted(tokens), targets).backward()  # a step, so the weights are not init
    torch.optim.SGD(converted.parameters(), lr=0.1).step()
    saved = full_state(converted)
    dcp.save(get_model_state_dict(converted), checkpoint_id=os.path.join(out_dir, "ckpt"))
    # Into an unconverted model of the same stack, sharded the same way.
    torch.manual_seed(123)
    _, plain = build("fsdp_mixed", convert=False)
    state = get_model_state_dict(plain)
    dcp.load(state, checkpoint_id=os.path.join(out_dir, "ckpt"))
    set_model_state_dict(plain, state)
    loaded = full_state(plain)
    if rank == 0:
        torch.save({"saved": saved, "loaded": loaded}, os.path.join(out_dir, "dcp.pt"))
    dist.destroy_process_group()


def test_a_sharded_checkpoint_of_a_converted_model_loads_into_an_unconverted_one(daemon,
                                                                                 tmp_path):
    spawn(checkpoint_worker, 2, daemon.socket, str(tmp_path))
    result = torch.load(tmp_path / "dcp.pt", weights_only=True)
    assert result["saved"].keys() == result["loaded"].keys()
    for name, t in result["saved"].items():
        assert torch.equal(result["loaded"][name], t), name
