"""Import, run and write back tiny Hugging Face architectures: a robustness sweep of gplace's torch and ONNX paths.

Every model is built from a small config with random weights (nothing is downloaded) and its dropout set to 0,
so that two runs compare exactly. Needs ``transformers`` and, for the ONNX column, ``onnxscript``, which gplace
does not depend on::

    pip install transformers onnxscript
    python benchmarks/hf_sweep.py --out benchmarks/hf_sweep.md

Per architecture (2 CPU devices ``/CPU:0``, ``/CPU:1`` unless said; "equal" = ``allclose``, atol 1e-4 against the
eager model, 1e-5 between two torch-v1 runs):

- torch, forward: ``from_torch``; torch-v1 runs a placement alternating op by op, equal to one device;
  ``split_program`` and ``dispatch(module_device_map(...))`` of that placement equal the eager model.
- torch, training: the joint forward+backward graph; torch-v1 alternating equal to one device (outputs and
  gradients).
- pipeline: ``align_to_modules``, then ``gpipe``, ``pipedream`` and ``ideal_dp`` on 4 CPU devices (pipe-v3,
  M = 4, GPipe); ``pipeline_split`` of each (keyword inputs); its ``Pipe`` equal to the eager model.
- ONNX: ``torch.onnx.export`` (dynamo); ``from_onnx``; ``split_onnx`` of the alternating placement run by
  onnxruntime equal to the whole model; torch-v1 alternating equal to one device.
"""

from __future__ import annotations

import argparse
import platform
import re
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from report_notes import timed_row, write_report  # benchmarks/ is on sys.path

import gplace
from gplace.export.onnx import run_parts, split_onnx
from gplace.export.torch import dispatch, module_device_map, pipeline_split, split_program
from gplace.importers.onnx import from_onnx
from gplace.importers.torch_export import from_torch
from gplace.ir import Cluster, Device, OpGraph, Placement
from gplace.pipeline import PipelineSimulator
from gplace.pipeline.stages import align_to_modules
from gplace.runtime.torch_runtime import TorchRuntime
from gplace.testing import alternating

VOCAB, IMAGE = 512, 32
CPU_MAP = {f"/CPU:{i}": "cpu" for i in range(4)}


def architectures() -> dict[str, Callable[[], torch.nn.Module]]:
    """Name -> a builder of the tiny model (hidden size 64, 1-2 layers, 4 heads)."""
    import transformers as T

    def lm(config_cls, **kw):
        return config_cls(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                          intermediate_size=128, max_position_embeddings=64, **kw)

    seq2seq = dict(vocab_size=VOCAB, d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128)
    return {
        "gpt2": lambda: T.GPT2LMHeadModel(T.GPT2Config(vocab_size=VOCAB, n_embd=64, n_layer=2, n_head=4,
                                                       n_positions=64)),
        "gpt_neox": lambda: T.GPTNeoXForCausalLM(lm(T.GPTNeoXConfig)),
        "llama": lambda: T.LlamaForCausalLM(lm(T.LlamaConfig, num_key_value_heads=2)),
        "mistral": lambda: T.MistralForCausalLM(lm(T.MistralConfig, num_key_value_heads=2)),
        "qwen2": lambda: T.Qwen2ForCausalLM(lm(T.Qwen2Config, num_key_value_heads=2)),
        "gemma": lambda: T.GemmaForCausalLM(lm(T.GemmaConfig, num_key_value_heads=2, head_dim=16)),
        "phi": lambda: T.PhiForCausalLM(lm(T.PhiConfig)),
        "bert": lambda: T.BertForMaskedLM(lm(T.BertConfig)),
        "roberta": lambda: T.RobertaForMaskedLM(lm(T.RobertaConfig)),
        "distilbert": lambda: T.DistilBertForMaskedLM(T.DistilBertConfig(
            vocab_size=VOCAB, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=64)),
        "mobilebert": lambda: T.MobileBertForMaskedLM(T.MobileBertConfig(
            vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            embedding_size=32, intra_bottleneck_size=32, true_hidden_size=32)),
        "t5": lambda: T.T5ForConditionalGeneration(T.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128,
                                                              num_layers=2, num_heads=4)),
        "bart": lambda: T.BartForConditionalGeneration(T.BartConfig(max_position_embeddings=64, **seq2seq)),
        "whisper": lambda: T.WhisperForConditionalGeneration(T.WhisperConfig(
            num_mel_bins=16, max_source_positions=16, max_target_positions=16, pad_token_id=0, bos_token_id=1,
            eos_token_id=2, decoder_start_token_id=1, **seq2seq)),
        "vit": lambda: T.ViTForImageClassification(T.ViTConfig(
            hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=IMAGE,
            patch_size=8, num_labels=10)),
        "resnet": lambda: T.ResNetForImageClassification(T.ResNetConfig(
            embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10)),
        "convnext": lambda: T.ConvNextForImageClassification(T.ConvNextConfig(
            num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10)),
    }


def build(name: str) -> torch.nn.Module:
    """The model with every dropout probability 0 and no key/value cache returned."""
    torch.manual_seed(0)
    config = architectures()[name]().config
    for key, value in list(vars(config).items()):
        if isinstance(value, float) and ("dropout" in key or "pdrop" in key):
            setattr(config, key, 0.0)
    config.use_cache = False
    torch.manual_seed(0)
    model = architectures()[name]().__class__(config)
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model.eval()


def example_inputs(name: str) -> dict[str, torch.Tensor]:
    """Keyword inputs of a batch of 2."""
    torch.manual_seed(0)
    if name in ("vit", "resnet", "convnext"):
        return {"pixel_values": torch.randn(2, 3, IMAGE, IMAGE)}
    ids = torch.randint(0, VOCAB, (2, 16))
    if name in ("t5", "bart"):
        return {"input_ids": ids, "decoder_input_ids": ids[:, :8]}
    if name == "whisper":
        return {"input_features": torch.randn(2, 16, 32), "decoder_input_ids": ids[:, :8]}
    return {"input_ids": ids}


def cpus(n: int) -> Cluster:
    return Cluster.build([Device(f"/CPU:{i}", "cpu") for i in range(n)], default_bandwidth=1e9, name=f"{n}xcpu")


def tensors(value) -> list[torch.Tensor]:
    from torch.utils._pytree import tree_leaves

    return [t for t in tree_leaves(value) if isinstance(t, torch.Tensor)]


def same(got, want, atol: float) -> bool:
    got, want = list(got), list(want)
    return len(got) == len(want) and all(
        (a is None and b is None) or (a is not None and b is not None and
                                      np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), atol=atol))
        for a, b in zip(got, want, strict=True))


def split_equals_single(graph: OpGraph, runtime: TorchRuntime, inputs=None) -> None:
    cluster = cpus(2)
    single = runtime.run(graph, cluster, Placement.single(graph, 0), inputs=inputs)
    split = runtime.run(graph, cluster, alternating(graph), inputs=inputs)
    assert same([None if t is None else t.detach() for t in split], [None if t is None else t.detach() for t in single],
                1e-5), "torch-v1: split outputs differ from one device"


def check_forward(name: str, runtime: TorchRuntime, work: Path) -> str:
    model, kw = build(name), example_inputs(name)
    graph = from_torch(model, kw)
    split_equals_single(graph, runtime)
    want = [t.detach() for t in tensors(model(**kw))]
    placement = alternating(graph)
    got = tensors(split_program(graph, cpus(2), placement, device_map=CPU_MAP)(**kw))
    assert same([t.detach() for t in got], want, 1e-4), "split_program differs from the eager model"
    device_map = module_device_map(graph, cpus(2), placement, device_map=CPU_MAP)
    assert same([t.detach() for t in tensors(dispatch(model, device_map)(**kw))], want, 1e-4), "dispatch differs"
    return f"{graph.num_ops} ops"


def check_training(name: str, runtime: TorchRuntime, work: Path) -> str:
    model, kw = build(name).train(), example_inputs(name)
    graph = from_torch(model, kw, training=True)
    split_equals_single(graph, runtime)
    return f"{graph.num_ops} ops"


def check_pipeline(name: str, runtime: TorchRuntime, work: Path) -> str:
    model, kw = build(name), example_inputs(name)
    graph = align_to_modules(from_torch(model, kw))
    want = [t.detach() for t in tensors(model(**kw))][:1]
    stages = []
    for method in ("gpipe", "pipedream", "ideal_dp"):
        report = gplace.place(graph, cpus(4), method=method, runtime=PipelineSimulator(4, "gpipe"))
        split = pipeline_split(graph, cpus(4), report.placement, model, kw, device_map=CPU_MAP)
        got = [t.detach() for t in tensors(split.pipe(**kw))][:1]
        assert same(got, want, 1e-4), f"{method}: the Pipe's output differs from the eager model"
        stages.append(str(len(split.devices)))
    return "stages " + "/".join(stages)


def check_onnx(name: str, runtime: TorchRuntime, work: Path) -> str:
    import onnxruntime as ort

    model, kw = build(name), example_inputs(name)
    path = work / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (), str(path), kwargs=kw, input_names=list(kw), dynamo=True, verbose=False)
    graph = from_onnx(path)
    feeds = {k: v.numpy() for k, v in kw.items()}
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    outputs = [o.name for o in session.get_outputs()]
    want = session.run(outputs, feeds)
    got = run_parts(split_onnx(graph, cpus(2), alternating(graph)), feeds, outputs)
    assert same(got.values(), want, 1e-4), "split_onnx parts differ from the whole model in onnxruntime"
    split_equals_single(graph, runtime)
    return f"{graph.num_ops} ops"


CHECKS = (check_forward, check_training, check_pipeline, check_onnx)


def attempt(check: Callable[..., str], *args) -> str:
    """``"ok, "`` and what ``check(*args)`` says, or the error it raised (with the innermost gplace frame)."""
    try:
        said = check(*args)
        return said if said.startswith("not run") else "ok, " + said
    except Exception as err:  # noqa: BLE001 - a sweep records every failure
        frame = next((f for f in reversed(traceback.extract_tb(err.__traceback__)) if "gplace" in f.filename), None)
        where = f" ({Path(frame.filename).name}:{frame.lineno})" if frame else ""
        message = re.sub(r"\x1b\[[0-9;]*m", "", str(err)).splitlines()[0][:160]  # no terminal colours
        return f"**{type(err).__name__}**{where}: {message}"


def main() -> None:
    import transformers

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="architectures (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write the report here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    runtime = TorchRuntime(steps=2, warmup=1, device_map=CPU_MAP)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [timed_row(name, lambda name=name: [attempt(check, name, runtime, Path(tmp)) for check in CHECKS])
                for name in args.names or architectures()]
    if args.out:
        head = (f"# Hugging Face architectures through gplace's torch and ONNX paths\n\n"
                f"Made by `python benchmarks/hf_sweep.py --out {args.out}` (see its docstring for each check), "
                f"{time.strftime('%Y-%m-%d')}: transformers {transformers.__version__}, torch {torch.__version__}, "
                f"Python {platform.python_version()}, 2 CPU cores. Models built from tiny configs with random "
                "weights, dropout 0.\n\n"
                "| architecture | torch forward: split == one device, split_program, dispatch | torch training: "
                "split == one device | pipeline_split of gpipe / pipedream / ideal_dp (stages) | ONNX: split_onnx, "
                "torch-v1 | s |\n|---|---|---|---|---|---:|\n")
        write_report(args.out, head + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
