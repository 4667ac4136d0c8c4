"""A tstor device type as a PyTorch device (docs/pytorch.md).

    import torch, tstor_torch
    x = torch.randn(3, 4, device=tstor_torch.name)   # "tstor:0", or the backend's own name

Importing this module loads the libtstor-torch built for the torch it runs in
(libtstor-torch2.so for torch 2.x, libtstor-torch.so for Debian's 1.13, from
the folder above this file's; $TSTOR_TORCH_LIB names another). The library
opens tstor's default context and makes the device type $TSTOR_TORCH_DEVICE
names (default: hpu, else the first type with memory of its own) PyTorch's
PrivateUse1 device. On torch 2.x this module then:

  - renames PrivateUse1 after that device type where PyTorch has no device of
    that name, else "tstor" (PyTorch has an hpu of its own, so hpu-stub's
    device is "tstor"); $TSTOR_TORCH_NAME chooses the name instead;
  - adds the methods PyTorch generates for a renamed device (x.tstor(),
    x.is_tstor, module.tstor(), storage.tstor());
  - registers itself as the device module, torch.<name>: the functions below.

On 1.13 the device stays "privateuseone", which 1.13 cannot rename, and torch
gets no module; the functions below work all the same, from tstor_torch.
"""
import contextlib
import os
import sys

import torch

TORCH_2 = int(torch.__version__.split(".")[0]) >= 2


def _library():
    path = os.environ.get("TSTOR_TORCH_LIB")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.join(os.path.dirname(here),
                        "libtstor-torch2.so" if TORCH_2 else "libtstor-torch.so")


try:
    torch.ops.load_library(_library())
except OSError as why:
    # a library built against another torch fails here, on a symbol this
    # torch lacks, before it can say which torch it was built for (2.x's
    # load_library keeps the loader's words in the cause)
    raise ImportError("tstor_torch: cannot load %s into torch %s: %s (a libtstor-torch loads only "
                      "into the torch it was built against)"
                      % (_library(), torch.__version__, why.__cause__ or why)) from why
_ops = torch.ops.tstor

_built_for = _ops.torch_version()
if _built_for.split(".")[:2] != torch.__version__.split("+")[0].split(".")[:2]:
    raise ImportError("tstor_torch: %s was built for torch %s, not for this torch %s"
                      % (_library(), _built_for, torch.__version__))


def _type_name():
    try:
        return _ops.device_type()
    except RuntimeError:
        return None  # the library warned as it loaded; every use raises why


def _choose_name(type_name):
    chosen = os.environ.get("TSTOR_TORCH_NAME")
    if chosen:
        if not chosen.isidentifier():
            raise ImportError("tstor_torch: TSTOR_TORCH_NAME=%s is not a name PyTorch can "
                              "give a device (letters, digits and _)" % chosen)
        return chosen
    if type_name and type_name.isidentifier():
        try:
            torch.device(type_name)
        except RuntimeError:
            return type_name  # a name PyTorch does not know: the backend's own
    return "tstor"


device_type = _type_name()
"""The tstor device type behind the device ("hpu"), or None where it failed to load."""

name = _choose_name(device_type) if TORCH_2 else "privateuseone"
"""The device's name in PyTorch: torch.device(tstor_torch.name, 0)."""


# ------------------------------------------------------------ the device

def _index(device):
    """The device index of device (None: the current device)."""
    if device is None:
        return _ops.current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    if device.type != name:
        raise ValueError("not a %s device: %s" % (name, device))
    return _ops.current_device() if device.index is None else device.index


def is_available():
    """Whether the device type loaded and has devices."""
    try:
        return _ops.device_count() > 0
    except RuntimeError:
        return False


def device_count():
    """How many devices the type has (0 where it did not load)."""
    try:
        return _ops.device_count()
    except RuntimeError:
        return 0


def is_initialized():
    return is_available()


def _lazy_init():
    _ops.device_count()  # raises why the device cannot be used


def _is_in_bad_fork():
    return False


def current_device():
    """The calling thread's current device index."""
    return _ops.current_device()


def set_device(device):
    """Makes device the calling thread's current device."""
    _ops.set_device(_index(device))


class device:
    """Context manager that makes device the current device, then restores."""

    def __init__(self, device):
        self.index = _index(device)
        self.previous = None

    def __enter__(self):
        self.previous = _ops.current_device()
        _ops.set_device(self.index)

    def __exit__(self, *exc):
        _ops.set_device(self.previous)
        return False


def synchronize(device=None):
    """Waits for all work on every stream of device."""
    _ops.synchronize(_index(device))


def get_device_name(device=None):
    """What tstor says the device stands for (tstor_device_describe)."""
    return _ops.describe(_index(device))


# ------------------------------------------------------------- memory

def mem_get_info(device=None):
    """(free, total) bytes of device, as its backend reports them
    (tstor_device_get_properties). NotImplementedError where it does not
    report both (a remote device has no free memory to report)."""
    free, total = _ops.mem_get_info(_index(device))
    return free, total


class DeviceProperties:
    """What a device reports of itself (get_device_properties). A field its
    backend does not report is None.

    name            what tstor says the device stands for (get_device_name)
    type, index     the tstor device ("hpu", 0)
    total_memory    bytes of memory the device has
    free_memory     bytes it can still allocate now
    max_allocation  the largest single allocation that would succeed now
    alignment       every allocation's address is a multiple of it
    id              stable across processes ("0000:3b:00.0", "hpu-stub:0")
    capabilities    what its backend offers beyond the required operations
                    ("streams", "fill", "properties", ...)"""

    def __init__(self, index):
        reported, caps, free, total, alignment, largest = _ops.properties(index)
        names = _ops.capability_names()

        def field(bit, value):
            return value if reported & bit else None
        self.name = _ops.describe(index)
        self.type = device_type
        self.index = index
        # the bits of tstor.h's TSTOR_PROP_FREE, _TOTAL, _ALIGNMENT,
        # _MAX_ALLOCATION and _ID
        self.free_memory = field(1, free)
        self.total_memory = field(2, total)
        self.alignment = field(4, alignment)
        self.max_allocation = field(8, largest)
        self.id = _ops.device_id(index) if reported & 16 else None
        self.capabilities = tuple(n for bit, n in enumerate(names) if n and caps & (1 << bit))

    def __repr__(self):
        return ("DeviceProperties(name=%r, total_memory=%r, free_memory=%r, id=%r, "
                "capabilities=%r)" % (self.name, self.total_memory, self.free_memory, self.id,
                                      self.capabilities))


def get_device_properties(device=None):
    """What device reports of itself: a DeviceProperties."""
    return DeviceProperties(_index(device))


def memory_stats(device=None):
    """tstor's allocator counters for device, by name (tstor_stats)."""
    return dict(zip(_ops.memory_stats_fields(), _ops.memory_stats(_index(device))))


def memory_allocated(device=None):
    return memory_stats(device)["allocated"]


def max_memory_allocated(device=None):
    return memory_stats(device)["peak_allocated"]


def memory_reserved(device=None):
    return memory_stats(device)["reserved"]


def max_memory_reserved(device=None):
    return memory_stats(device)["peak_reserved"]


def reset_peak_memory_stats(device=None):
    _ops.reset_peak_memory_stats(_index(device))


def empty_cache():
    """Gives the current device's cached, unused blocks back to it."""
    _ops.empty_cache(-1)


# ---------------------------------------------------- streams and events

if TORCH_2:
    _PRIVATEUSE1 = int(torch._C._autograd.DeviceType.PrivateUse1.value)

    class Stream(torch.Stream):
        """A stream of the device, one of tstor's streams: torch.Stream
        made on this device by default."""

        def __new__(cls, device=None, priority=0, **kwargs):
            if kwargs:  # stream_id, device_index, device_type: an existing stream
                return super().__new__(cls, **kwargs)
            return super().__new__(cls, device=torch.device(name, _index(device)),
                                   priority=priority)

    def Event(enable_timing=False, blocking=False, interprocess=False):
        """A torch.Event of the current device, a tstor event. tstor's events
        keep no time: elapsed_time raises. (A function, not a subclass:
        torch.Event's methods take other events of exactly that type.)"""
        return torch.Event(device=torch.device(name, current_device()),
                           enable_timing=enable_timing, blocking=blocking,
                           interprocess=interprocess)

    def current_stream(device=None):
        """The calling thread's current stream on device."""
        index = _index(device)
        return Stream(stream_id=_ops.current_stream(index), device_index=index,
                      device_type=_PRIVATEUSE1)

    def default_stream(device=None):
        return Stream(stream_id=0, device_index=_index(device), device_type=_PRIVATEUSE1)

    def set_stream(stream):
        """Makes stream the current stream of its device."""
        _ops.set_stream(stream.device_index, stream.stream_id)

    @contextlib.contextmanager
    def stream(stream):
        """Makes stream current for the block, then restores the previous one."""
        if stream is None:
            yield
            return
        previous = current_stream(stream.device_index)
        set_stream(stream)
        try:
            yield
        finally:
            set_stream(previous)

    # ------------------------------------------------------------ random

    def manual_seed(seed):
        """Seeds the current device's default generator."""
        _ops.manual_seed(-1, int(seed))

    def manual_seed_all(seed):
        for index in range(device_count()):
            _ops.manual_seed(index, int(seed))

    def seed():
        return _ops.seed(-1)

    def seed_all():
        for index in range(device_count()):
            _ops.seed(index)

    def initial_seed():
        return _ops.initial_seed(-1)

    def get_rng_state(device=None):
        return _ops.get_rng_state(_index(device))

    def set_rng_state(new_state, device=None):
        _ops.set_rng_state(_index(device), new_state)

    def set_offset(offset, device=None):
        """Raises: a device generator draws as the cpu's does, keeping no offset."""
        _ops.set_offset(_index(device), int(offset))

    def get_offset(device=None):
        return _ops.get_offset(_index(device))

    def get_rng_state_all():
        return [get_rng_state(index) for index in range(device_count())]

    def set_rng_state_all(new_states):
        for index, state in enumerate(new_states):
            set_rng_state(state, index)

    # ----------------------------------------------------------- autocast

    def get_amp_supported_dtype():
        """What torch.autocast may cast to on the device. tstor registers no
        autocast policies (docs/pytorch.md): autocast on the device runs
        each operator in the dtypes it is given."""
        return [torch.float16, torch.bfloat16]

    # ------------------------------------------------------- registration

    def _register():
        torch.utils.rename_privateuse1_backend(name)
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_packed_sequence=True, for_storage=True)
        torch._register_device_module(name, sys.modules[__name__])

    if torch._C._get_privateuse1_backend_name() == "privateuseone":
        _register()
    elif torch._C._get_privateuse1_backend_name() != name:
        raise ImportError("tstor_torch: PyTorch's PrivateUse1 device is already named %r in this "
                          "process" % torch._C._get_privateuse1_backend_name())
