"""The shared analysis layer: what names hold, which grad mode is active, what aliases mean."""

from torchlint.analysis.analyzer import Analyzer
from torchlint.analysis.names import dotted_name, keyword_arg, literal_bool, positional_args
from torchlint.analysis.scopes import ClassInfo, FunctionInfo, GradMode, Mode
from torchlint.analysis.values import GRAD_KINDS, TENSOR_KINDS, UNKNOWN, Kind, Value

__all__ = [
    "Analyzer", "ClassInfo", "FunctionInfo", "GRAD_KINDS", "GradMode", "Kind", "Mode", "TENSOR_KINDS",
    "UNKNOWN", "Value", "dotted_name", "keyword_arg", "literal_bool", "positional_args",
]
