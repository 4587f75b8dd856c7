"""Facts about the torch API the analysis relies on, kept as data in one place.

Every name here is a *canonical* qualified name (see ``CANONICAL``): aliases such
as ``torch.autograd.no_grad`` are mapped onto ``torch.no_grad`` first.
"""

from __future__ import annotations

# Spellings of the same object under different import paths.
CANONICAL: dict[str, str] = {
    "torch.autograd.no_grad": "torch.no_grad",
    "torch.autograd.grad_mode.no_grad": "torch.no_grad",
    "torch.autograd.enable_grad": "torch.enable_grad",
    "torch.autograd.grad_mode.enable_grad": "torch.enable_grad",
    "torch.autograd.set_grad_enabled": "torch.set_grad_enabled",
    "torch.autograd.grad_mode.set_grad_enabled": "torch.set_grad_enabled",
    "torch.autograd.inference_mode": "torch.inference_mode",
    "torch.autograd.grad_mode.inference_mode": "torch.inference_mode",
    "torch.nn.parameter.Parameter": "torch.nn.Parameter",
    "torch.nn.modules.module.Module": "torch.nn.Module",
    "torch.Tensor.requires_grad_": "torch.Tensor.requires_grad_",
    "torch.autograd.variable.Variable": "torch.autograd.Variable",
    "torch.Variable": "torch.autograd.Variable",
}

# Context managers / decorators that switch grad mode.
GRAD_DISABLING = frozenset({"torch.no_grad", "torch.inference_mode"})
GRAD_ENABLING = frozenset({"torch.enable_grad"})
GRAD_SETTING = "torch.set_grad_enabled"

# Tensor factories: ``requires_grad=True`` makes a leaf that requires grad.
FACTORIES = frozenset(
    "torch." + name
    for name in (
        "tensor as_tensor randn rand randint randn_like rand_like randint_like zeros ones empty full "
        "zeros_like ones_like empty_like full_like arange range linspace logspace eye normal "
        "randperm empty_strided"
    ).split()
)
PARAMETER = "torch.nn.Parameter"
# Copies with their own storage: of a module, a module of the same class with its own parameters
# (``copy.copy`` shares them, so it is not one).
DEEP_COPYING_FUNCTIONS = frozenset({"copy.deepcopy"})
# Legacy ``Variable(t, requires_grad=True)``: a new leaf that requires grad (a plain Tensor since
# torch 0.4); ``Variable(t)``: a plain tensor (of a leaf: an alias that requires grad).
VARIABLE = "torch.autograd.Variable"

# Factories whose dtype is inferred from their data arguments (int data -> int tensor).
DTYPE_FROM_DATA = frozenset({"torch.tensor", "torch.as_tensor", "torch.arange", "torch.range", "torch.full"})
# Factories that always produce an integer tensor unless a dtype is given.
INTEGER_FACTORIES = frozenset({"torch.randint", "torch.randint_like", "torch.randperm"})
INTEGER_DTYPES = frozenset(
    "torch." + name
    for name in (
        "long int int64 int32 int16 int8 short uint8 uint16 uint32 uint64 bool"
    ).split()
)

# Tensor methods that return the *same object* when nothing changes.  Whether
# they do depends on device/dtype, so they are "device-dependent".
CONVERSION_METHODS = frozenset({"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "type", "contiguous"})
# Conversions that are a no-op for a default (float32, CPU) factory result.
NOOP_ON_DEFAULT_TENSOR = frozenset({"cpu", "float", "contiguous"})
# Conversions that copy a default (float32) tensor: the result is a non-leaf on any device.
DTYPE_COPYING_METHODS = frozenset({"double", "half", "bfloat16"})
# Ops that, applied right after creating a leaf, leave a non-leaf view or copy (TL003).
RESHAPING_METHODS = frozenset(
    {"view", "reshape", "t", "unsqueeze", "squeeze", "expand", "permute", "transpose", "flatten", "view_as",
     "reshape_as", "expand_as"}
)
# Methods whose result is a view sharing the receiver's storage (``reshape``/``flatten`` of a
# contiguous tensor, as a parameter is): an in-place op on a view of a leaf that requires grad
# raises 'a view of a leaf Variable that requires grad is being used in an in-place operation'
# (measured for view/reshape/t/indexing; ``expand`` is left out: writing into it fails otherwise).
VIEW_METHODS = frozenset(
    {"view", "view_as", "reshape", "reshape_as", "t", "transpose", "permute", "unsqueeze", "squeeze", "flatten",
     "narrow", "select", "diagonal", "movedim", "swapaxes", "swapdims", "unflatten"}
)
# Tensor attributes that are views of it.
VIEW_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag"})
# The dtype a dtype-conversion method converts to (``t.double()`` is ``t.to(torch.float64)``).
DTYPE_OF_METHOD: dict[str, str] = {"double": "float64", "half": "float16", "bfloat16": "bfloat16"}
# Methods that copy a tensor to the CPU (a copy that keeps the graph: detach before it).
CPU_COPY_METHODS = frozenset({"cpu"})
# Keywords of ``torch.tensor(t, ...)`` a fix can hand to ``.to(...)``: they only convert.
CONVERSION_KEYWORDS = frozenset({"dtype", "device"})
# Out-of-place arithmetic a manual update rebinds with (``w = w.sub(lr * g)``), each with an
# in-place twin ``<name>_``, as methods and as ``torch.<name>`` functions.
UPDATE_METHODS = frozenset({"sub", "add", "subtract", "addcmul", "addcdiv", "mul", "div"})
# Ops that may hand back their input object unchanged (``x.flatten()`` of a 1-d tensor).
MAY_RETURN_SELF_METHODS = CONVERSION_METHODS | {"flatten", "detach", "requires_grad_", "data"}
# The differentiable op each arithmetic operator runs (libcst operator class names; the
# augmented forms ``+=`` ... run the same op).
OPERATOR_OPS: dict[str, str] = {
    "Add": "add", "Subtract": "sub", "Multiply": "mul", "Divide": "div", "MatrixMultiply": "matmul", "Power": "pow",
}
AUGMENTED_OPERATOR_OPS: dict[str, str] = {f"{name}Assign": op for name, op in OPERATOR_OPS.items()}

# Methods ending in "_" that do not mutate tensor data (fine on a leaf).
NON_MUTATING_UNDERSCORE = frozenset({"requires_grad_", "share_memory_", "detach_", "retain_grad_", "pin_memory_"})


def is_inplace_method(name: str) -> bool:
    """``mul_``, ``clamp_``, ``copy_``: a tensor method that changes its receiver's data."""
    return name.endswith("_") and not name.startswith("__") and name not in NON_MUTATING_UNDERSCORE


# In-place methods with an out-of-place twin of the same name without the underscore
# (tests/test_saved_tensors.py checks each against torch).
OUT_OF_PLACE_TWINS = frozenset(
    "add sub mul div clamp clamp_min clamp_max clip relu sigmoid tanh exp exp2 expm1 log log1p log2 log10 neg "
    "abs pow sqrt rsqrt reciprocal square sin cos tan masked_fill masked_scatter index_fill index_add index_copy "
    "scatter scatter_add addcmul addcdiv lerp floor ceil round trunc frac sign erf logit nan_to_num true_divide "
    "floor_divide remainder fmod subtract multiply divide".split()
)
# torch.NAME_(x) functions with an out-of-place torch.NAME (checked against torch by the tests).
TORCH_INPLACE_FUNCTIONS = frozenset("sigmoid relu tanh exp sqrt rsqrt reciprocal tan exp2 expm1 clamp".split())
# Namespaces whose functions are the table's ``torch.NAME`` / ``F.NAME`` spellings.
OP_NAMESPACES = frozenset({"torch", "torch.nn.functional", "torch.special", "torch.linalg"})
# Ops whose result shares the receiver's version counter (views, and ``detach``): an in-place op
# on one is an in-place op on the other for autograd's saved-tensor check (TL007).  Not the same
# set as VIEW_METHODS: ``detach``/``expand`` share the counter but are not writable views of a
# leaf for TL002, ``reshape`` may copy.
VERSION_SHARING_METHODS = frozenset(
    {"view", "view_as", "t", "transpose", "permute", "squeeze", "unsqueeze", "expand", "expand_as", "narrow",
     "select", "diagonal", "detach", "swapaxes", "swapdims", "movedim", "unflatten", "as_strided"}
)
VERSION_SHARING_ATTRIBUTES = frozenset({"T", "mT", "H", "mH"})

# Methods returning a non-tensor Python value (the graph is gone).
SCALAR_METHODS = frozenset({"item", "tolist", "numpy", "__float__", "__int__"})

# Module methods that run the module on their arguments as calling it does (``m.forward(x)``
# without the hooks, ``m.__call__(x)``): the module's output.
MODULE_CALL_METHODS = frozenset({"forward", "__call__"})
# Module methods that return the module itself.
MODULE_SELF_METHODS = frozenset(
    {"to", "cuda", "cpu", "float", "double", "half", "bfloat16", "train", "eval", "requires_grad_", "apply", "type"}
)
# Calls returning a module that runs the module passed and reads its attributes through to it:
# ``torch.compile(model)`` is an ``OptimizedModule`` whose call and methods are the model's.
MODULE_KEEPING_WRAPPERS = frozenset({"torch.compile"})
# Modules whose call runs the module passed (its ``forward``) on each device: a module whatever
# they are given, and the module passed's own when it is known.
PARALLEL_WRAPPERS = frozenset({
    "torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel",
    "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
})
# Methods whose result iterates over parameters (leaves that require grad).
PARAMETER_ITERATORS = frozenset({"parameters"})
NAMED_PARAMETER_ITERATORS = frozenset({"named_parameters"})
PARAMETER_SOURCES = PARAMETER_ITERATORS | NAMED_PARAMETER_ITERATORS
# Methods only an ``nn.Module`` (of the objects training code handles) has: a value of unknown
# origin they are called on is a module (not ``train``: trainers and agents have one too; not
# ``zero_grad``/``state_dict``: optimizers have them).
MODULE_EVIDENCE_METHODS = PARAMETER_SOURCES | frozenset(
    {"eval", "modules", "named_modules", "children", "named_children", "buffers", "named_buffers"}
)
# What the module graph (``analysis/module_graph.py``) takes as evidence of a module: also
# ``train()`` (optimizers have ``zero_grad`` and ``state_dict``, not ``train``).
MODULE_GRAPH_EVIDENCE_METHODS = MODULE_EVIDENCE_METHODS | frozenset({"train"})
# Methods of a module that do not run it (``netD.netG_adv_loss(x)`` does, ``netD.to(dev)`` does not).
NOT_FORWARD_METHODS = MODULE_GRAPH_EVIDENCE_METHODS | MODULE_SELF_METHODS | frozenset(
    {"register_buffer", "to", "cuda", "cpu"}
)
# Methods whose result carries no graph of the module calls before them.
GRAPH_CUTTING_METHODS = frozenset({"detach", "item", "tolist", "numpy", "detach_"})

# Attribute names under which built-in nn modules keep their parameters.
BUILTIN_PARAMETER_ATTRS = frozenset(
    {"weight", "bias", "in_proj_weight", "in_proj_bias", "weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"}
)

# Attributes of a module that hold no submodule: a ``weight`` under them is no parameter
# (``criterion.loss_fn.weight`` is reached through a module; ``model.config.weight`` is not).
NOT_SUBMODULE_ATTRIBUTES = frozenset({"config", "args", "hparams", "opt", "cfg", "data", "grad", "state"})

# Built-in nn modules without parameters: calling them derives the result from the inputs.
PARAMETERLESS_MODULE_SUFFIXES = ("Loss",)
PARAMETERLESS_MODULES = frozenset(
    "torch.nn." + name
    for name in (
        "ReLU ReLU6 LeakyReLU ELU SELU CELU GELU SiLU Mish Sigmoid Tanh Hardtanh Hardsigmoid Hardswish "
        "Softmax LogSoftmax Softmax2d Softplus Softsign Softshrink Hardshrink Tanhshrink Threshold "
        "LogSigmoid GLU Dropout Dropout1d Dropout2d Dropout3d AlphaDropout Flatten Unflatten Identity "
        "MaxPool1d MaxPool2d MaxPool3d AvgPool1d AvgPool2d AvgPool3d AdaptiveAvgPool1d AdaptiveAvgPool2d "
        "AdaptiveAvgPool3d AdaptiveMaxPool1d AdaptiveMaxPool2d AdaptiveMaxPool3d Upsample PixelShuffle "
        "PixelUnshuffle ZeroPad2d ConstantPad1d ConstantPad2d ReflectionPad2d ReplicationPad2d"
    ).split()
)
# Built-in containers: calling one runs its layers, which save their parameters for backward.
MODULE_DICT = "torch.nn.ModuleDict"
# Methods that put entries into a dict (or ``nn.ModuleDict``) other than by ``d[k] = v``.
DICT_FILLING_METHODS = frozenset({"update", "setdefault", "__setitem__"})
CONTAINER_MODULES = frozenset({"torch.nn.Sequential", "torch.nn.ModuleList", MODULE_DICT})
# torch.nn attributes that are not module classes.
NN_NON_MODULES = frozenset(
    {"torch.nn.Parameter", "torch.nn.functional", "torch.nn.init", "torch.nn.utils", "torch.nn.Module",
     "torch.nn.parameter", "torch.nn.modules", "torch.nn.Buffer"}
)
NN_MODULE_BASE = "torch.nn.Module"
OPTIMIZER_PREFIX = "torch.optim."

# Source substrings without which no value can be a leaf that requires grad:
# factories / requires_grad_() / .requires_grad = True, nn.Parameter,
# .parameters() / .named_parameters(), built-in module parameters, and function
# arguments whose .grad is read.  Rules that need a leaf use these as their tokens.
# "Parameter(" / "Parameter as" (an aliased import) and "parameters(" rather than
# the bare words, which docstrings ("Parameters:") are full of.
PARAMETER_TOKENS = ("Parameter(", "Parameter as")
# What a star import of a project module conventionally brings when the file uses these names
# unbound, ``torch`` among them (``from models.common import *``; see ``ImportTable.add_star_import``).
STAR_IMPORTED_TORCH_NAMES = {"torch": "torch", "nn": "torch.nn", "F": "torch.nn.functional"}
# The classes ``from torch.nn import *`` / ``from torch.optim import *`` bind (their ``__all__``
# in torch 2.13, less submodules and private helpers; tests/test_torch_star_imports.py checks
# each against torch).  Class names only: a lower-case name a star import of
# ``torch.nn.functional`` would bind (``dropout``, ``pad``) is too often a local variable.
STAR_EXPORTS: dict[str, frozenset[str]] = {
    "torch.nn": frozenset("""
        AdaptiveAvgPool1d AdaptiveAvgPool2d AdaptiveAvgPool3d AdaptiveLogSoftmaxWithLoss AdaptiveMaxPool1d
        AdaptiveMaxPool2d AdaptiveMaxPool3d AlphaDropout AvgPool1d AvgPool2d AvgPool3d BCELoss
        BCEWithLogitsLoss BatchNorm1d BatchNorm2d BatchNorm3d Bilinear CELU CTCLoss ChannelShuffle
        ConstantPad1d ConstantPad2d ConstantPad3d Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d
        ConvTranspose3d CosineEmbeddingLoss CosineSimilarity CrossEntropyLoss DataParallel Dropout
        Dropout1d Dropout2d Dropout3d ELU Embedding EmbeddingBag FeatureAlphaDropout Flatten Fold GELU GLU
        GRU GRUCell GaussianNLLLoss GroupNorm Hardshrink Hardsigmoid Hardswish Hardtanh HingeEmbeddingLoss
        HuberLoss Identity InstanceNorm1d InstanceNorm2d InstanceNorm3d KLDivLoss L1Loss LPPool1d LPPool2d
        LSTM LSTMCell LayerNorm LeakyReLU Linear LocalResponseNorm LogSigmoid LogSoftmax MSELoss
        MarginRankingLoss MaxPool1d MaxPool2d MaxPool3d MaxUnpool1d MaxUnpool2d MaxUnpool3d Mish Module
        ModuleDict ModuleList MultiLabelMarginLoss MultiLabelSoftMarginLoss MultiMarginLoss
        MultiheadAttention NLLLoss PReLU PairwiseDistance Parameter ParameterDict ParameterList
        PixelShuffle PixelUnshuffle PoissonNLLLoss RMSNorm RNN RNNCell RReLU ReLU ReLU6 ReflectionPad1d
        ReflectionPad2d ReflectionPad3d ReplicationPad1d ReplicationPad2d ReplicationPad3d SELU Sequential
        SiLU Sigmoid SmoothL1Loss SoftMarginLoss Softmax Softmax2d Softmin Softplus Softshrink Softsign
        SyncBatchNorm Tanh Tanhshrink Threshold Transformer TransformerDecoder TransformerDecoderLayer
        TransformerEncoder TransformerEncoderLayer TripletMarginLoss Unflatten Unfold Upsample
        UpsamplingBilinear2d UpsamplingNearest2d ZeroPad1d ZeroPad2d ZeroPad3d
    """.split()),
    "torch.optim": frozenset(
        "ASGD Adadelta Adagrad Adam AdamW Adamax LBFGS NAdam Optimizer RAdam RMSprop Rprop SGD SparseAdam".split()),
}

LEAF_SOURCE_TOKENS = ("requires_grad", *PARAMETER_TOKENS, "parameters(", ".weight", ".bias", ".in_proj_", ".grad")

FLOAT_DTYPES = frozenset(
    "torch." + name
    for name in "float float32 float64 double half float16 bfloat16 complex64 complex128 cfloat cdouble".split()
)
TORCH_DTYPES = FLOAT_DTYPES | INTEGER_DTYPES

# ---------------------------------------------------------------- autograd events
# How backward, gradient computation, optimizer steps and gradient zeroing are spelled.
# One recognition for every rule: see ``torchlint.analysis.events``.
BACKWARD_FUNCTIONS = frozenset({"torch.autograd.backward"})
GRAD_FUNCTIONS = frozenset({"torch.autograd.grad"})
# ``self.manual_backward(loss)`` (Lightning): the first argument is backpropagated.
DELEGATED_BACKWARD_METHODS = frozenset({"manual_backward"})
# ``accelerator.backward(loss)``, ``fabric.backward(loss)``, ``model_engine.backward(loss)``:
# objects (by the last name of their expression) whose ``backward(x)`` backpropagates ``x``.
BACKWARD_DELEGATE_NAMES = frozenset({"accelerator", "fabric", "engine", "model_engine", "deepspeed_engine"})
# ``scaler.scale(loss).backward()``: the loss is the argument of ``scale``.
LOSS_SCALING_METHODS = frozenset({"scale"})
# ``backward(retain_graph=True)``; ``retain_variables`` is its spelling before torch 0.4
# (2017 tutorials: ``D_loss.backward(retain_variables=True)``), which kept the graph the same way.
RETAIN_GRAPH_KEYWORDS = ("retain_graph", "retain_variables")
ZERO_GRAD_METHODS = frozenset({"zero_grad"})
ZERO_GRAD_FUNCTIONS = frozenset({"torch._foreach_zero_"})
# In-place methods that zero a gradient tensor (``p.grad.zero_()``, ``p.grad.data.fill_(0)``).
GRAD_ZEROING_METHODS = frozenset({"zero_", "fill_"})
STEP_METHODS = frozenset({"step"})
# Module methods that copy new values into the parameters in place, as a step does (measured:
# ``load_state_dict`` between a forward and the backward through it raises M4).
PARAMETER_OVERWRITING_METHODS = frozenset({"load_state_dict"})
# Methods through which a backward() that succeeds proves the receiver requires grad: they
# depend on their receiver only (``y.sum().backward()``).
SAME_GRAPH_METHODS = frozenset(
    {"sum", "mean", "norm", "square", "abs", "squeeze", "view", "reshape", "float", "double", "clone", "prod",
     "max", "min", "amax", "exp", "log"}
)
# ``torch.optim`` classes that are not optimizers: their ``step()`` updates no parameter.
NON_OPTIMIZER_PREFIXES = ("torch.optim.lr_scheduler.", "torch.optim.swa_utils.")
# Assigned to ``p.grad``, these reset it.
ZERO_FACTORIES = frozenset({"torch.zeros_like", "torch.zeros"})

# Methods a framework calls with grad disabled when nothing in the file calls them
# (Lightning runs its evaluation hooks under no_grad / inference_mode).
CALLED_WITHOUT_GRAD_BY_FRAMEWORK = frozenset({"validation_step", "test_step", "predict_step"})

# ---------------------------------------------------------------- where values go (analysis.uses)
# What a use does with a tensor, for the escape analysis of accumulators and histories.
# Attribute reads and methods that cut the graph (the result is a tensor without history).
DETACHING_ATTRIBUTES = frozenset({"data"})
DETACHING_METHODS = frozenset({"detach"})
# Methods that copy a tensor within its graph: a copy of a detached tensor has no graph either.
GRAPH_KEEPING_COPY_METHODS = frozenset({"clone", "contiguous"})
# Methods converting to numpy: M6 on a tensor that requires grad.
NUMPY_METHODS = frozenset({"numpy"})
# List methods that only add to / clear the receiver, and list/dict methods that read it
# (they work on a list of numbers as well as on a list of tensors).
LIST_MUTATORS = frozenset({"append", "extend", "insert", "clear", "remove"})
LIST_METHODS = frozenset({"copy", "index", "count", "sort", "reverse", "pop", "keys", "values", "items", "get"})
# Libraries that convert their arguments with numpy (``np.asarray``): M6 on a tensor, or on a
# list of tensors, that requires grad (measured: np.array, np.mean, np.asarray).
# NumPy arrays made from shapes or numbers: storing a tensor into an element converts it to a
# float (`avg[i] += loss` keeps no graph; measured: torch warns and stores the number).
NUMPY_ARRAY_FACTORIES = frozenset(
    f"numpy.{name}" for name in
    "zeros ones empty full zeros_like ones_like empty_like full_like arange linspace".split()
)
NUMPY_LIKE_PREFIXES = ("numpy.", "matplotlib.", "pandas.", "seaborn.", "scipy.")
# Modules whose functions turn their arguments into numbers or text.
NUMBER_MODULE_PREFIXES = ("math.", "json.", "statistics.", "logging.")
# Builtins that make a number or text of their argument, or pass (part of) it on.
NUMBER_BUILTINS = frozenset("print float int len str repr round format bool isinstance type id hash".split())
PASS_THROUGH_BUILTINS = frozenset("sum list tuple max min sorted reversed abs enumerate zip iter next".split())
# Methods that format their arguments into text (logging, TensorBoard, tqdm): a tensor that
# requires grad is converted without error (TensorBoard detaches it first).
FORMATTING_METHODS = frozenset(
    "info debug warning warn error critical exception add_scalar add_scalars set_postfix set_postfix_str "
    "set_description write".split()
)
# torch functions whose result has no graph (``torch.tensor([l1, l2])`` copies the values).
GRAPH_CUTTING_FACTORIES = frozenset({"torch.tensor", "torch.Tensor", "torch.FloatTensor"})
# torch functions that store their argument somewhere else.
STORING_FUNCTIONS = frozenset({"torch.save"})
# Container methods that store their arguments in the receiver (``losses.append(loss)``).
STORING_METHODS = frozenset({"append", "extend", "insert", "add", "update", "setdefault"})

# ---------------------------------------------------------------- calls that never touch gradients
# Builtins that neither change their arguments nor run code of the file on them (they cannot
# ``retain_grad()`` or ``detach_()`` a tensor handed to them).
ARGUMENT_PRESERVING_BUILTINS = frozenset(
    "print len float int bool str repr format isinstance type id hash round abs range enumerate zip min max sum"
    .split()
)
# Builtins, modules and methods of unknown objects that neither run ``backward()`` nor reset or
# fill a gradient: a call to one of them cannot hide an autograd event.
GRAD_FREE_BUILTINS = frozenset(
    "print len range enumerate zip float int str bool min max sum abs round isinstance issubclass list dict "
    "tuple set frozenset sorted reversed any all iter next getattr hasattr repr format type divmod map filter "
    "id hash open vars callable".split()
)
GRAD_FREE_MODULES = frozenset(
    "torch numpy math time logging random os sys json itertools functools collections copy pickle re "
    "warnings wandb tqdm datetime pathlib statistics".split()
)
# (GradScaler, logging, progress bars, lists ...)
GRAD_FREE_METHODS = frozenset(
    "unscale_ scale update item append extend format write info debug warning add_scalar add_scalars "
    "set_postfix set_description log_dict clip_grad_norm_ clip_grad_value_ synchronize "
    "parameters named_parameters state_dict load_state_dict".split()
)
# Called on an object torchlint knows nothing about, these are tensor (or array) methods.
TENSOR_LIKE_METHODS = CONVERSION_METHODS | SCALAR_METHODS | frozenset(
    "view reshape squeeze unsqueeze permute transpose flatten size dim numel sum mean max min argmax argmin "
    "softmax log_softmax clone detach float long int bool eq ne gt lt ge le norm abs exp log pow sqrt t "
    "expand expand_as repeat contiguous masked_fill chunk split".split()
)

# ---------------------------------------------------------------- named but not called (TL013)
# Methods that only act when called: a bare ``obj.<name>`` statement does nothing.
# name -> what is lost when the call is missing.
ACTION_METHODS: dict[str, str] = {
    "zero_grad": "the gradients are never reset, so they accumulate across steps",
    "step": "the step never runs",
    "backward": "no gradient is computed",
    "eval": "the model stays in training mode: dropout stays on and batch norm keeps updating its statistics",
    "train": "the model's mode does not change: after `eval()` it stays in eval mode",
}
# Grad-mode context managers: classes, so ``with torch.no_grad:`` (no instance) raises
# ``TypeError: 'type' object does not support the context manager protocol``.
GRAD_MODE_CLASSES = GRAD_DISABLING | GRAD_ENABLING

# Tensor methods (and torch functions of the same names) whose result is an integer or bool
# tensor that never requires grad (measured with torch 2.13: argmax, comparisons, casts).
NON_DIFFERENTIABLE = frozenset(
    "argmax argmin argsort argwhere nonzero isnan isinf isfinite isclose eq ne gt lt ge le "
    "logical_and logical_or logical_not logical_xor long int bool byte short char".split()
)

# Reductions that return a (values, indices) pair: always, or only when given a dimension
# (``torch.max(t)`` is a tensor, ``torch.max(t, 1)`` and ``t.max(dim=1)`` a pair).  The indices
# (element 1, ``.indices``) are int64 and never require grad (measured with torch 2.13).
VALUES_AND_INDICES = frozenset("sort topk kthvalue mode cummax cummin".split())
VALUES_AND_INDICES_GIVEN_A_DIM = frozenset("max min median nanmedian".split())

# Other frameworks with a `.grad` of their own: a file that imports one of them and not torch
# is not torch code, and a name whose `.grad` is read there is no assumed torch leaf
# (d2l ships the same training loops for MXNet, where `param -= lr * param.grad` is right).
OTHER_AUTOGRAD_FRAMEWORKS = ("mxnet", "tensorflow", "jax", "paddle", "oneflow", "mindspore", "chainer")
# Names that make code look like torch's; imported from another package, they are that package's.
AUTOGRAD_VOCABULARY = ("Module", "Parameter", "Tensor", "Variable")

# ---------------------------------------------------------------- outputs and conversions
# (facts behind TL014/TL015/TL018/TL019: see ``torchlint.analysis.facts``)
# Softmax spellings: their output is a probability distribution (value tag "softmax").
SOFTMAX_FUNCTIONS = frozenset({"torch.softmax", "torch.nn.functional.softmax", "torch.special.softmax"})
SOFTMAX_METHODS = frozenset({"softmax"})
SOFTMAX_MODULES = frozenset({"torch.nn.Softmax"})
# Methods whose result holds the same probabilities, rearranged or moved (measured: shape ops,
# copies and conversions of a softmax output are still rows of probabilities).
PROBABILITY_KEEPING_METHODS = frozenset({
    "unsqueeze", "squeeze", "view", "view_as", "reshape", "reshape_as", "flatten", "permute", "transpose", "t",
    "contiguous", "clone", "expand", "expand_as", "to", "cuda", "cpu", "float", "double", "half",
})
# Matrix products: probabilities times a tensor that carries no graph (one-hot labels, a label
# distribution) are mixtures of its rows, probabilities again (Matching Networks' attention over
# the support labels).  Times a tensor that requires grad (attention over value vectors) they are not.
LABEL_MIXING_METHODS = frozenset({"bmm", "matmul", "mm"})
LABEL_MIXING_FUNCTIONS = frozenset({"torch.bmm", "torch.matmul", "torch.mm"})
# What the log-space counterpart of each softmax spelling is called (last name component).
LOG_SOFTMAX_NAME = "log_softmax"
# Containers whose output is their last layer's output.
SEQUENTIAL_MODULES = frozenset({"torch.nn.Sequential"})
# Methods that add a last layer to an ``nn.Sequential``, and the position of the layer argument.
SEQUENTIAL_LAYER_METHODS = {"add_module": 1, "append": 0, "register_module": 1}
# Losses that expect unnormalised logits: a softmax in front squashes the loss (TL019).
LOGIT_LOSS_FUNCTIONS = frozenset({"torch.nn.functional.cross_entropy"})
LOGIT_LOSS_MODULES = frozenset({"torch.nn.CrossEntropyLoss"})
# Losses that expect log-probabilities (``log_softmax``), not probabilities.
LOG_PROBABILITY_LOSS_FUNCTIONS = frozenset({"torch.nn.functional.nll_loss"})
LOG_PROBABILITY_LOSS_MODULES = frozenset({"torch.nn.NLLLoss"})
# ``torch.tensor(t)`` copies its data without history (measured with torch 2.13: UserWarning
# "To copy construct from a tensor ...", ``requires_grad`` False).  ``torch.Tensor(t)`` and
# ``torch.FloatTensor(t)`` of a tensor that requires grad return an alias that keeps the graph
# (AliasBackward0, gradients reach the source): they are not copies.
COPY_CONSTRUCTORS = frozenset({"torch.tensor"})
# Return a tensor argument itself (or a differentiable conversion of it): the graph is kept.
SHARING_CONSTRUCTORS = frozenset({"torch.as_tensor", "torch.asarray"})
# Tensors made from a NumPy array: never a graph.
FROM_NUMPY_FUNCTIONS = frozenset({"torch.from_numpy", "torch.frombuffer"})
# NumPy functions that convert tensor arguments with ``.numpy()``: on a tensor that requires grad
# (or a list of them) they raise "Can't call numpy() on Tensor that requires grad" (measured).
NUMPY_CONVERSIONS = frozenset(
    "numpy." + name
    for name in (
        "array asarray asanyarray ascontiguousarray stack concatenate vstack hstack save savetxt median average cumsum"
    ).split()
)
# NumPy reductions that convert a *list* of tensors with ``.numpy()`` (M6, measured); given one
# tensor they call its own method instead (and fail with a TypeError about ``axis``).
NUMPY_LIST_CONVERSIONS = frozenset("numpy." + name for name in "mean std var sum max min amax amin".split())
# Plotting functions that turn their data arguments into NumPy arrays.
PLOTTING_FUNCTIONS = frozenset(
    "matplotlib.pyplot." + name
    for name in "plot scatter imshow hist bar barh semilogx semilogy loglog errorbar fill_between step stem".split()
)
# Methods of a matplotlib ``Axes`` that turn their data arguments into NumPy arrays, and the
# calls that make one (``fig, axs = plt.subplots(2, 2)``; ``ax = fig.add_subplot(111)``).
AXES_PLOTTING_METHODS = frozenset(name.split(".")[-1] for name in PLOTTING_FUNCTIONS)
AXES_FACTORIES = frozenset("matplotlib.pyplot." + name for name in "subplots subplot axes gca".split())
FIGURE_FACTORIES = frozenset({"matplotlib.pyplot.figure", "matplotlib.pyplot.subplots"})
FIGURE_AXES_METHODS = frozenset({"add_subplot", "add_axes", "gca"})
# Tensor methods that return metadata (a ``torch.Size``, an int, a bool), not a tensor.
METADATA_METHODS = frozenset(
    "size dim ndimension numel nelement element_size stride storage_offset is_contiguous data_ptr get_device "
    "is_floating_point is_complex".split()
)
# ``xs.append(v)``: the list now also holds ``v``.
APPEND_METHODS = frozenset({"append"})

# ---------------------------------------------------------------- graphs (TL010)
# Tensor methods whose result has no graph, whatever the receiver.
GRAPH_FREE_RESULT_METHODS = DETACHING_METHODS | SCALAR_METHODS | METADATA_METHODS | NON_DIFFERENTIABLE
# Builtins whose result carries no graph (a Python number, a length, a range, None).
GRAPH_FREE_RESULT_BUILTINS = frozenset({"float", "int", "len", "bool", "print", "range"})
# Conversions whose result hangs off the receiver's graph (``t.type()`` without arguments is a string).
GRAPH_CONVERSION_METHODS = CONVERSION_METHODS - {"type"}
# Methods that do not change their arguments or receiver in place (tensor conversions and
# methods without a graph, optimizer, list and logging calls).
ARGUMENT_PRESERVING_METHODS = (
    GRAPH_CONVERSION_METHODS
    | GRAPH_FREE_RESULT_METHODS
    | frozenset("backward step zero_grad append extend insert format item write info debug log add_scalar".split())
)
# Built-in modules with trainable parameters (their output certainly requires grad) that
# save tensors for backward: measured with torch 2.13 (a second backward raises M5).
SAVING_PARAMETER_MODULES = frozenset(
    "Linear Bilinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d ConvTranspose3d RNN LSTM GRU "
    "RNNCell LSTMCell GRUCell Embedding LayerNorm GroupNorm BatchNorm1d BatchNorm2d BatchNorm3d PReLU".split()
)
# ... of which the output does not depend differentiably on the input.
NOT_DIFFERENTIABLE_IN_INPUT_MODULES = frozenset({"Embedding"})

# Calls that build a new tensor from plain data: never a graph (TL005).
RETENSORIZING_FACTORIES = frozenset(
    "torch." + name
    for name in "tensor as_tensor from_numpy scalar_tensor Tensor FloatTensor DoubleTensor HalfTensor".split()
)
# What takes a value out of the graph: `.item()`, `.tolist()`, `.numpy()`, `.detach()`, `float(...)`.
GRAPH_DROPPING_METHODS = frozenset({"item", "tolist", "numpy", "detach"})
GRAPH_DROPPING_BUILTINS = frozenset({"float", "int"})
# Factories whose every element literal decides the dtype (``torch.tensor([1, 2])``); the
# others of DTYPE_FROM_DATA take it from their first number (``torch.full``, ``torch.arange``).
DTYPE_FROM_ELEMENTS = frozenset({"torch.tensor", "torch.as_tensor"})
# Full reductions: a tensor method called with no arguments returns a scalar.
FULL_REDUCTION_METHODS = frozenset({"mean", "sum", "norm", "std", "var", "prod", "amax", "amin", "logsumexp"})
# ... as ``torch.NAME(x)`` functions (one positional argument).
FULL_REDUCTION_FUNCTIONS = frozenset({"torch.mean", "torch.sum", "torch.norm"})
# A mean or sum of a loss keeps its terms (it is linear): a backward through `(rec + kl).mean()`
# proves `rec` and `kl` were computed with grad, as through `rec + kl` (``uses.ValueFlow.terms``).
TERM_KEEPING_REDUCTION_METHODS = frozenset({"mean", "sum"})
TERM_KEEPING_REDUCTION_FUNCTIONS = frozenset({"torch.mean", "torch.sum"})
# ``torch.nn.functional`` losses (a scalar unless ``reduction="none"``).
FUNCTIONAL_LOSSES = frozenset(
    "cross_entropy binary_cross_entropy binary_cross_entropy_with_logits nll_loss kl_div mse_loss l1_loss "
    "smooth_l1_loss huber_loss poisson_nll_loss gaussian_nll_loss hinge_embedding_loss margin_ranking_loss "
    "soft_margin_loss multilabel_soft_margin_loss cosine_embedding_loss triplet_margin_loss".split()
)
# Methods that start an accumulator afresh: a list's ``clear()``, a meter's ``reset()``.
ACCUMULATOR_RESET_METHODS = frozenset({"clear", "reset"})
# ``torch.max(a, b)`` / ``a.max(b)`` with a tensor ``b`` is the elementwise op (saved as these).
ELEMENTWISE_OF_REDUCTION: dict[str, str] = {"max": "maximum", "min": "minimum"}
