"""The code blocks of docs/pretraining.md run, in order, in one namespace (the walk-through stays true)."""

from __future__ import annotations

import re
from pathlib import Path

import torch

DOC = Path(__file__).resolve().parents[1] / "docs" / "pretraining.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.DOTALL)


def test_every_code_block_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    blocks = _blocks()
    assert len(blocks) == 5
    namespace: dict = {"__name__": "pretraining_md"}
    try:
        for i, block in enumerate(blocks):
            if i == 3:  # the pretrained weights, to check that fine-tuning leaves them alone
                before = [p.detach().clone() for p in namespace["policy"].parameters()]
            try:
                exec(compile(block, f"{DOC.name} block {i}", "exec"), namespace)
            except Exception as err:
                raise AssertionError(f"{DOC.name} block {i} failed: {err!r}\n{block}") from err
    finally:
        torch.set_num_threads(threads)
    result, tuned, zero_shot = namespace["result"], namespace["tuned"], namespace["zero_shot"]
    assert result.samples == 40 * 8 and (tmp_path / "pretrain_run" / "checkpoint.pt").is_file()
    assert any(h["losses/loss_self_imitation"] > 0 for h in result.history)
    assert (tmp_path / "my_policy.pt").is_file()
    assert zero_shot.speedup > 1.0  # measured: 3.10 s against 4.43 s on the fastest device (1.43x)
    assert tuned.samples == 10 * 8 and tuned.best_step_time < zero_shot.best_baseline  # measured: 2.64 s
    after = list(namespace["policy"].parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))

    # several pretrainings: ranked by their training graphs' greedy ratio; the fastest greedy placement is picked
    from gplace.pretrained import place_zero_shot

    ranked, pretrained, graph = namespace["ranked"], namespace["pretrained"], namespace["new_graph"]
    assert [r[0] for r in ranked] == sorted(r[0] for r in ranked) and len(pretrained) == 3
    runtime, cluster = namespace["runtime"], namespace["cluster"]
    greedy = [runtime.measure(graph, cluster, place_zero_shot(e, p, graph, cluster)).step_time for e, p in pretrained]
    assert namespace["chosen"] == greedy.index(min(greedy)) and namespace["picked"].samples == 10 * 8
