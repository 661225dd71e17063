"""The TensorFlow op types the importer treats apart (control flow, CPU-only, free, variables)."""

from __future__ import annotations

from gplace.ir.graph import VARIABLE_OPS

__all__ = ["CONTROL_FLOW_OPS", "CPU_ONLY_OPS", "FREE_OPS", "FUNCTIONAL_CONTROL_FLOW", "VARIABLE_OPS"]

CONTROL_FLOW_OPS = frozenset({
    "While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase", "For", "Enter", "RefEnter", "Exit",
    "RefExit", "Switch", "RefSwitch", "_SwitchN", "Merge", "RefMerge", "NextIteration", "RefNextIteration",
    "LoopCond",
})
"""Op types whose op count per step depends on the data: not handled."""

CPU_ONLY_OPS = frozenset({
    "PyFunc", "PyFuncStateless", "EagerPyFunc", "IteratorGetNext", "IteratorGetNextSync", "IteratorV2",
    "Iterator", "AnonymousIterator", "AnonymousIteratorV2", "AnonymousIteratorV3", "MakeIterator",
    "OneShotIterator", "IteratorToStringHandle", "IteratorFromStringHandleV2", "SaveV2", "RestoreV2",
    "MergeV2Checkpoints", "ShardedFilename", "ShardedFilespec", "Print", "PrintV2", "StringFormat", "DecodeJpeg",
    "DecodePng", "DecodeImage", "DecodeRaw", "ParseExample", "ParseExampleV2", "ParseSingleExample",
    "ReaderReadV2", "FIFOQueueV2", "RandomShuffleQueueV2", "QueueDequeueV2", "QueueDequeueManyV2",
    "QueueEnqueueV2", "HashTableV2", "MutableHashTableV2", "LookupTableFindV2", "LookupTableImportV2",
    "InitializeTableV2", "InitializeTableFromTextFileV2",
})
"""Op types with no GPU kernel (besides any op reading or writing strings, and ``*Dataset`` ops)."""

FREE_OPS = frozenset({
    "NoOp", "Const", "HostConst", "Placeholder", "PlaceholderWithDefault", "VarHandleOp", "VariableV2", "Variable",
    "VarIsInitializedOp", "ReadVariableOp", "Identity", "IdentityN", "Reshape", "Squeeze", "ExpandDims", "Shape",
    "ShapeN", "Size", "Rank", "StopGradient", "PreventGradient", "Snapshot", "EnsureShape", "DestroyResourceOp",
})
"""Bookkeeping op types: no kernel worth timing (cost 0 on every kind)."""

FUNCTIONAL_CONTROL_FLOW = frozenset({"While", "StatelessWhile", "If", "StatelessIf", "Case", "StatelessCase"})
"""Control-flow ops imported as one op each (the package docstring); the rest of :data:`CONTROL_FLOW_OPS` is refused."""
