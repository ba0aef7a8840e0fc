from __future__ import annotations

import subprocess
from typing import Any

import pytest

from pydet.agent import slots
from pydet.agent.slots import SlotSpec


def test_artificial_slots() -> None:
    assert slots.artificial(2) == [
        SlotSpec(id="0", type="cpu", device="cpu"),
        SlotSpec(id="1", type="cpu", device="cpu"),
    ]
    assert slots.artificial(0) == []


def test_parse_nvidia_smi() -> None:
    out = "0, GPU-aaa, NVIDIA H100 80GB HBM3\n1, GPU-bbb, NVIDIA A100-SXM4-40GB, rev, b\n\n"
    assert slots.parse_nvidia_smi(out) == [
        SlotSpec(id="0", type="cuda", device="NVIDIA H100 80GB HBM3", uuid="GPU-aaa"),
        SlotSpec(id="1", type="cuda", device="NVIDIA A100-SXM4-40GB, rev, b", uuid="GPU-bbb"),
    ]
    with pytest.raises(ValueError, match="unexpected nvidia-smi output"):
        slots.parse_nvidia_smi("No devices were found\n")


class FakeRun:
    def __init__(self, returncode: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.result = subprocess.CompletedProcess([], returncode, stdout, stderr)
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        self.calls.append(argv)
        return self.result


def test_gpus_are_used_when_no_slot_count_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    run = FakeRun(stdout="0, GPU-x, Tesla T4\n")
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr("subprocess.run", run)
    assert slots.detect(None) == [SlotSpec("0", "cuda", "Tesla T4", "GPU-x")]
    assert run.calls == [
        ["/usr/bin/nvidia-smi", "--query-gpu=index,uuid,name", "--format=csv,noheader"]
    ]
    # An explicit count means artificial slots, GPUs or not.
    assert slots.detect(3) == slots.artificial(3)


def test_no_nvidia_smi_means_one_cpu_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    assert slots.detect(None) == slots.artificial(1)


def test_failing_nvidia_smi_falls_back_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr("subprocess.run", FakeRun(9, stderr="NVML: driver not loaded"))
    assert slots.detect(None) == slots.artificial(1)
    assert "driver not loaded" in caplog.text
