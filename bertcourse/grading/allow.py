"""The building blocks a "write it yourself" part allows: an allow-list, not a deny-list.

When a part forbids the library's version of what it asks for (`forbid=`), the referee's
static rules (`rules.StudentCode.violations`) resolve every name the learner's graded function
can reach to the object it denotes; the object must be one of these building blocks, one of
the learner's own functions and classes, or a name the instructor's set-up cell imports.
Anything else (a private helper, `torch.ops.aten`, `torch._decomp`, a registry, another
module's re-export, forward-mode autodiff, a module passed around as a value, a name the
analysis cannot resolve) gives the submission `needs_review`, and the call scores nothing:
evading the list costs a review, never earns points.

`BASE` holds what every such part allows: tensor arithmetic, reductions, shapes, creation,
comparison and indexing, `math`, the plain builtins. `EXTRA` adds, per group of `FORBIDDEN`
(`grading.forbid`), what that exercise's statement hands the learner (modules of
`torch.nn` for the parts that assemble a model, `random` for the data parts, ...). The
forbidden names themselves always win over the list.

Entries are dotted paths; `torch.Tensor.<name>` allows a tensor method (also when it is
called on a value, `x.softmax(-1)`); `<module>.*` allows a module's public callables, never a
module nor a dynamic object (`grading.dynamic`): `typing.*` hands out `typing.cast`, not
`typing.sys` nor the evaluator `typing.get_type_hints`.
"""

from __future__ import annotations

# torch functions (also the tensor method of the same name where there is one)
_TORCH = """
abs absolute acos add addcdiv addcmul addmm all allclose amax amin any arange arccos arcsin
arctan arctan2 argmax argmin argsort as_tensor asin atan atan2 baddbmm bernoulli bincount
bitwise_and bitwise_not bitwise_or bitwise_xor bmm broadcast_shapes broadcast_tensors
broadcast_to bucketize cat ceil chunk clamp clamp_max clamp_min clip clone column_stack
concat concatenate cos cosh count_nonzero cummax cummin cumprod cumsum deg2rad diag
diag_embed diagonal diff div divide dot dstack einsum empty empty_like eq equal erf erfc exp
exp2 expand_copy expm1 eye finfo flatten flip fliplr flipud float_power floor floor_divide
fmax fmin fmod frac full full_like gather ge greater greater_equal gt hstack hypot iinfo
index_add index_copy index_fill index_put index_select inner is_floating_point is_complex
is_grad_enabled is_nonzero is_tensor isclose isfinite isin isinf isnan isneginf isposinf
isreal kron le less less_equal lerp linspace log log10 log1p log2 logaddexp logaddexp2
log_softmax logsumexp logical_and logical_not logical_or logical_xor logspace lt manual_seed masked_fill
masked_scatter masked_select matmul max maximum mean median min minimum mm mode moveaxis
movedim msort mul multinomial multiply mv nan_to_num nanmean nansum narrow ne neg negative
no_grad nonzero normal not_equal numel ones ones_like outer permute pow prod promote_types
rad2deg rand rand_like randint randint_like randn randn_like randperm ravel reciprocal
relu remainder repeat_interleave reshape result_type roll rot90 round rsqrt scatter scatter_add
scatter_reduce searchsorted select sgn sigmoid sign signbit sin sinh slice_scatter softmax
sort split sqrt square squeeze stack std std_mean sub subtract sum swapaxes swapdims t take
take_along_dim tan tanh tensor tensor_split tensordot tile topk trace transpose tril
tril_indices triu triu_indices true_divide trunc unbind unique unique_consecutive unravel_index
unsqueeze var var_mean vdot view_as_real vsplit vstack where xlogy zeros zeros_like
enable_grad inference_mode set_grad_enabled get_default_dtype is_inference_mode_enabled
Generator Size Tensor dtype device float16 float32 float64 bfloat16 half float double int8
int16 int32 int64 uint8 bool long int short complex64 cfloat inf nan pi e
"""

# tensor methods and attributes beyond the functions above
_TENSOR = """
T mT H values indices shape dtype device ndim is_cuda requires_grad grad data is_leaf layout names
size dim numel item tolist type type_as to float double half bfloat16 int long bool short
byte char cpu contiguous is_contiguous view view_as reshape_as expand expand_as repeat
unfold stride storage_offset element_size nelement new_tensor new_zeros new_ones new_full
new_empty fill_ zero_ copy_ add_ sub_ mul_ div_ pow_ clamp_ clamp_min_ clamp_max_
masked_fill_ masked_scatter_ index_fill_ index_add_ index_copy_ index_put_ scatter_
scatter_add_ scatter_reduce_ uniform_ normal_ bernoulli_ random_ exponential_ neg_ abs_
sqrt_ exp_ log_ lerp_ addcmul_ addcdiv_ sign_ floor_ ceil_ round_ trunc_ tril_ triu_
sigmoid_ tanh_ reciprocal_ rsqrt_ square_ fmod_ remainder_ squeeze_ unsqueeze_ t_
transpose_ detach detach_ requires_grad_ retain_grad numpy apply_ map_ float_power_ maximum
minimum __getitem__ __setitem__ __len__ __iter__ __contains__ __bool__ __int__ __float__
__index__ __format__ __repr__ __str__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __add__
__sub__ __mul__ __truediv__ __floordiv__ __mod__ __pow__ __matmul__ __neg__ __abs__
__and__ __or__ __xor__ __invert__ __radd__ __rsub__ __rmul__ __rtruediv__
"""

# torch.nn.functional
_FUNCTIONAL = """
softmax linear dropout gelu relu tanh sigmoid pad one_hot embedding layer_norm normalize
silu elu leaky_relu softplus
"""

_BUILTINS = """
abs all any ascii bin bool bytes callable chr complex dict divmod enumerate filter float
format frozenset hash hex id int isinstance issubclass iter len list map max min next object
oct ord pow print range repr reversed round set slice sorted str sum tuple zip super
property staticmethod classmethod NotImplemented Ellipsis None True False
ArithmeticError AssertionError AttributeError Exception IndexError KeyError LookupError
NotImplementedError OverflowError RuntimeError StopIteration TypeError ValueError
ZeroDivisionError
"""


def _paths(prefix: str, names: str) -> tuple[str, ...]:
    return tuple(f"{prefix}.{n}" for n in names.split())


TENSOR_ATTRS = frozenset(_TORCH.split() + _TENSOR.split())

BASE: tuple[str, ...] = (
    *_paths("torch", _TORCH),
    *_paths("torch.Tensor", " ".join(sorted(TENSOR_ATTRS))),
    *_paths("torch.nn.functional", _FUNCTIONAL),
    *_paths("torch.linalg", "norm vector_norm matrix_norm"),
    *_paths("torch.special", "erf erfc expm1 exp2 log1p xlogy logit"),
    *_paths("builtins", _BUILTINS),
    "torch.nn.Parameter",
    "torch.nn.Module",
    "math.*",
    "typing.*",
    "collections.abc.*",
    "collections.Counter",
    "collections.OrderedDict",
    "collections.defaultdict",
    "collections.deque",
    "collections.namedtuple",
    "itertools.*",
    "functools.partial",
    "functools.reduce",
    "functools.cache",
    "functools.lru_cache",
    "functools.wraps",
    "dataclasses.dataclass",
    "dataclasses.field",
    "operator.add",
    "operator.mul",
    "operator.itemgetter",
    "copy.copy",
    "copy.deepcopy",
    "warnings.*",
)

_NN_BLOCKS = _paths(
    "torch.nn",
    "Linear Embedding LayerNorm Dropout GELU ReLU Tanh Sigmoid Softmax Identity ModuleList "
    "ModuleDict Sequential ParameterList ParameterDict",
) + _paths("torch.nn.init", "normal_ zeros_ ones_ constant_ trunc_normal_ xavier_uniform_")

# the parts that assemble a model: its modules, and the losses written in chapter 4
_MODEL = _NN_BLOCKS + _paths(
    "torch.nn.functional",
    "cross_entropy nll_loss log_softmax mse_loss binary_cross_entropy_with_logits",
)

_DATA = (
    "random.*",
    "unicodedata.*",
    "string.*",
    "re.*",
    "torch.nn.functional.pad",
)

# group of FORBIDDEN -> what its statement hands the learner beyond BASE
EXTRA: dict[str, tuple[str, ...]] = {
    "self_attention": _NN_BLOCKS,
    "embeddings": _NN_BLOCKS,
    "layer": _NN_BLOCKS,
    "modules": _NN_BLOCKS,
    "mlm": _DATA,
    "nsp": _DATA,
    "masks": _DATA,
    "optim": (
        "torch.optim.Optimizer",
        "torch.optim.Optimizer.__init__",
        "torch.optim.Optimizer.zero_grad",
        "torch.optim.Optimizer.state_dict",
        "torch.optim.Optimizer.load_state_dict",
    ),
    "schedules": (
        "torch.optim.lr_scheduler.LambdaLR",
        "torch.optim.AdamW",
        "torch.optim.Adam",
        "torch.optim.SGD",
        "torch.Tensor.backward",
        "torch.nn.utils.clip_grad_norm_",
    ),
}

# forbidden paths under these modules: the part also hands the learner these blocks
EXTRA_BY_MODULE: dict[str, tuple[str, ...]] = {
    "bertcourse.tokenization": _DATA,
    "bertcourse.zh": _DATA,
    "tokenizers": _DATA,
    "bertcourse.heads": _MODEL,
    "bertcourse.model": _MODEL,
    "bertcourse.encoder": _MODEL,
    "bertcourse.optim": _NN_BLOCKS + ("torch.optim.Optimizer",),
    "bertcourse.embeddings": _NN_BLOCKS,
    "bertcourse.attention": _NN_BLOCKS,
    # chapter 10's paired comparison
    "bertcourse.stats": _paths("statistics", "mean fmean stdev variance pstdev pvariance median"),
}
