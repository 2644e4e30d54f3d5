"""The path users run today for decode context parallelism, on N GPUs (one process per GPU, started by torchrun):
pack (a contiguous copy per destination) + torch.distributed.all_to_all_single over NCCL (outputs and LSEs) + an
LSE-weighted combine in torch, at dcp4j's layer shape (16 heads per rank, head_dim 512, bf16, cp = the number of
processes). Timed like dcp4j's benchmark: CUDA graphs of --calls layers, median over samples per rank, max over ranks.

  torchrun --nproc-per-node 8 nccl_a2a.py [--heads 16] [--head-dim 512] [--batches 1,2,...,256] [--calls 60]
           [--samples 30] [--csv F] [--dump-batch B --dump-dir DIR]
  python3 nccl_a2a.py --compare DIR/nccl.safetensors dcp4j.safetensors

--dump-batch writes, from rank 0, every rank's inputs at batch B as DIR/inputs.safetensors (partial_o.<r>
[T, H, cp, D] bf16, partial_lse.<r> [T, H, cp] f32: the input of `dcp4j reduce`) and every rank's NCCL-path output as
DIR/nccl.safetensors (out.<r> [T*H, D]). --compare checks `dcp4j reduce`'s output against it.
"""
import argparse, json, os, struct, sys



def write_safetensors(path, tensors):
    """tensors: name -> contiguous CPU torch tensor (bf16 or f32)."""
    import torch
    names = {torch.bfloat16: "BF16", torch.float32: "F32"}
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        t = tensors[name]
        flat = t.contiguous().reshape(-1)  # a size-1 dim may leave a stride other than 1 behind
        raw = (flat.view(torch.int16) if flat.dtype == torch.bfloat16 else flat).numpy().tobytes()
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def read_safetensors(path):
    """name -> the tensor as float32 (BF16 and F32 tensors only)."""
    import torch
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        raw = bytearray(data[a:b])
        if meta["dtype"] == "BF16":
            t = torch.frombuffer(raw, dtype=torch.int16).view(torch.bfloat16)
        elif meta["dtype"] == "F32":
            t = torch.frombuffer(raw, dtype=torch.float32)
        else:
            raise SystemExit(f"{path}: {name} has dtype {meta['dtype']}, expected BF16 or F32")
        out[name] = t.reshape(meta["shape"]).float()
    return out


def compare(nccl_path, dcp4j_path):
    ref, got = read_safetensors(nccl_path), read_safetensors(dcp4j_path)
    worst = 0.0
    for name in sorted(ref):
        if name not in got:
            raise SystemExit(f"{dcp4j_path} has no {name}")
        a, b = ref[name], got[name]
        if a.shape != b.shape:
            raise SystemExit(f"{name}: shapes differ, {list(a.shape)} vs {list(b.shape)}")
        rel = ((a - b).norm() / max(a.norm().item(), 1e-30)).item()
        worst = max(worst, rel)
        print(f"{name}: relative L2 difference NCCL path vs dcp4j {rel:.2e}, max abs {(a - b).abs().max().item():.2e}")
    print(f"max relative difference over ranks: {worst:.2e} ({'ok' if worst <= 1e-2 else 'FAILED'}, tolerance 1e-2)")
    return 0 if worst <= 1e-2 else 1


def combine(recv_o, recv_lse):
    """recv_o [cp, T, H, D] bf16, recv_lse [cp, T, H] f32 (source-major) -> [T*H, D] bf16, base-2 LSEs."""
    import torch
    lse = torch.where(torch.isnan(recv_lse) | (recv_lse == float("inf")), float("-inf"), recv_lse)
    m = lse.amax(dim=0)
    m = torch.where(m == float("-inf"), torch.zeros_like(m), m)
    e = torch.exp2(lse - m)
    den = e.sum(dim=0)
    w = torch.where(den > 0, e / den, torch.zeros_like(e))
    out = (recv_o.float() * w.unsqueeze(-1)).sum(dim=0)
    return out.to(torch.bfloat16).reshape(-1, recv_o.shape[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--head-dim", type=int, default=512)
    ap.add_argument("--batches", default="1,2,4,8,16,32,64,128,256")
    ap.add_argument("--calls", type=int, default=60)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--csv")
    ap.add_argument("--dump-batch", type=int)
    ap.add_argument("--dump-dir")
    ap.add_argument("--compare", nargs=2, metavar=("NCCL", "DCP4J"))
    a = ap.parse_args()
    if a.compare:
        sys.exit(compare(*a.compare))
    if (a.dump_batch is None) != (a.dump_dir is None):
        raise SystemExit("--dump-batch and --dump-dir go together")

    import torch
    import torch.distributed as dist
    dist.init_process_group("nccl")
    rank, cp = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local % torch.cuda.device_count())
    dev = torch.device("cuda")
    H, D = a.heads, a.head_dim
    if rank == 0:
        print(f"NCCL path (pack + all_to_all_single x2 + torch combine), cp {cp} processes, {H} heads/rank, "
              f"head_dim {D}, bf16, {a.calls} calls per graph, L2 hot, µs per layer call = max over ranks of each "
              f"rank's median", file=sys.stderr)
        print(f"{'batch':>6} {'us/call':>10} {'rel.err':>9}")
    rows = []
    for B in [int(x) for x in a.batches.split(",")]:
        g = torch.Generator(device="cpu").manual_seed(2026 * 1000 + B)
        # every rank draws every rank's inputs, so that rank 0 can dump them and each rank can check against fp64
        attn = [torch.randn(B, cp * H, D, generator=g).to(torch.bfloat16) for _ in range(cp)]
        lse = [torch.randn(B, cp * H, generator=g) * 3.0 for _ in range(cp)]
        my_o, my_lse = attn[rank].to(dev), lse[rank].to(dev)
        send_o = torch.empty(cp, B, H, D, dtype=torch.bfloat16, device=dev)
        send_lse = torch.empty(cp, B, H, dtype=torch.float32, device=dev)
        recv_o, recv_lse = torch.empty_like(send_o), torch.empty_like(send_lse)
        out = torch.empty(B * H, D, dtype=torch.bfloat16, device=dev)

        def layer():
            send_o.copy_(my_o.view(B, cp, H, D).permute(1, 0, 2, 3))      # pack: destination-major
            send_lse.copy_(my_lse.view(B, cp, H).permute(1, 0, 2))
            dist.all_to_all_single(recv_o, send_o)
            dist.all_to_all_single(recv_lse, send_lse)
            out.copy_(combine(recv_o, recv_lse))

        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                layer()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(a.calls):
                layer()
        for _ in range(5):
            graph.replay()
        torch.cuda.synchronize()
        times = []
        for _ in range(a.samples):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e3 / a.calls)
        times.sort()
        median = torch.tensor([times[len(times) // 2]], device=dev)
        dist.all_reduce(median, op=dist.ReduceOp.MAX)
        # fp64 check of this rank's output
        src_o = torch.stack([attn[s].view(B, cp, H, D)[:, rank].double() for s in range(cp)])
        src_l = torch.stack([lse[s].view(B, cp, H)[:, rank].double() for s in range(cp)])
        w = torch.softmax(src_l * torch.log(torch.tensor(2.0, dtype=torch.float64)), dim=0)
        ref = (src_o * w.unsqueeze(-1)).sum(0).reshape(-1, D)
        err = torch.tensor([((out.double().cpu() - ref).norm() / ref.norm()).item()], device=dev)
        dist.all_reduce(err, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"{B:>6} {median.item():>10.2f} {err.item():>9.1e}", flush=True)
        rows.append((B, median.item(), err.item()))
        if a.dump_batch == B:
            outs = [torch.empty_like(out) for _ in range(cp)]
            dist.all_gather(outs, out)
            if rank == 0:
                os.makedirs(a.dump_dir, exist_ok=True)
                inputs = {}
                for r in range(cp):
                    inputs[f"partial_o.{r}"] = attn[r].view(B, cp, H, D).permute(0, 2, 1, 3).contiguous()
                    inputs[f"partial_lse.{r}"] = lse[r].view(B, cp, H).permute(0, 2, 1).contiguous()
                write_safetensors(os.path.join(a.dump_dir, "inputs.safetensors"), inputs)
                write_safetensors(os.path.join(a.dump_dir, "nccl.safetensors"),
                                  {f"out.{r}": outs[r].cpu() for r in range(cp)})
                print(f"dumped batch {B}: {a.dump_dir}/inputs.safetensors, {a.dump_dir}/nccl.safetensors",
                      file=sys.stderr)
        del graph
    if rank == 0 and a.csv:
        with open(a.csv, "w") as f:
            f.write("batch,us_per_call,max_rel_err\n")
            for B, us, err in rows:
                f.write(f"{B},{us},{err}\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
