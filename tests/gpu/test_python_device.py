#!/usr/bin/env python3
"""orch.Session.run on device tensors (DLPack) on a GPU machine with PyTorch: a model compiled
for CUDA run from torch CUDA tensors returns torch CUDA tensors equal, bit for bit, to the host
run's numpy outputs; the input is produced by a kernel still queued on PyTorch's stream when run()
is called; outputs= writes into given tensors; a wrong dtype and a non-contiguous tensor are
refused with orch.Error. Skips (exit 0, a line saying so) without
a GPU or without PyTorch's CUDA; ORCH_REQUIRE_GPU=1 makes that a failure.

usage: PYTHONPATH=python ORCH_LIBRARY=.../liborch.so tests/gpu/test_python_device.py ORCH_BINARY
"""
import os
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    try:
        import torch
        have = torch.cuda.is_available()
    except ImportError:
        have = False
    if not have:
        if os.environ.get("ORCH_REQUIRE_GPU", "0") not in ("", "0"):
            print("FAIL: ORCH_REQUIRE_GPU is set, but PyTorch sees no CUDA device")
            return 1
        print("skip: no PyTorch with a CUDA device\n0 passed, 0 failed")
        return 0
    import orch
    tmp = tempfile.mkdtemp(prefix="orch-pydev-")
    model = os.path.join(ROOT, "examples", "tiny_cnn", "model.onnx")
    s = orch.compile(model, os.path.join(tmp, "m.orch"), target="cuda",
                     input_shapes={"image": (2, 3, 32, 32)}, db=os.path.join(tmp, "p.db"))
    passed = failed = 0

    def case(name, fn):
        nonlocal passed, failed
        try:
            fn()
            print(f"ok   {name}")
            passed += 1
        except Exception as e:  # a failed check or an unexpected error: the case fails
            print(f"FAIL {name}: {type(e).__name__}: {e}")
            failed += 1

    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 32, 32)).astype(np.float32)
    want = s.run({"image": x})

    def device_in_device_out():
        src = torch.from_numpy(x).cuda()
        # Produced on PyTorch's stream right before the call: orch must wait for it.
        big = torch.empty(1 << 28, device="cuda")
        for _ in range(8):
            big.mul_(1.0001)
        xd = src * 1.0
        got = s.run({"image": xd})
        for k, v in want.items():
            assert isinstance(got[k], torch.Tensor) and got[k].is_cuda, type(got[k])
            assert np.array_equal(got[k].cpu().numpy(), v), k

    def outputs_given():
        xd = torch.from_numpy(x).cuda()
        out = {t.name: torch.full(t.shape, float("nan"), device="cuda") for t in s.outputs}
        got = s.run({"image": xd}, outputs=out)
        for k, v in want.items():
            assert got[k] is out[k]
            assert np.array_equal(out[k].cpu().numpy(), v), k

    def refusals():
        for bad, words in ((torch.from_numpy(x).cuda().double(), "expects float32"),
                           (torch.from_numpy(x.transpose(0, 1, 3, 2).copy()).cuda()
                            .transpose(2, 3), "not C-contiguous")):
            try:
                s.run({"image": bad})
            except orch.Error as e:
                assert words in str(e), str(e)
            else:
                raise AssertionError(f"accepted a tensor that is {words}")

    case("device_in_device_out", device_in_device_out)
    case("outputs_given", outputs_given)
    case("refusals", refusals)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
