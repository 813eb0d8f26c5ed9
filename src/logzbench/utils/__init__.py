"""Small shared helpers of the ground layer, re-exported from their modules.

* :mod:`.threads`: torch thread counts that do not oversubscribe the CPUs;
* :mod:`.devices`: devices, available memory, seeded generators, ``logmeanexp``;
* :mod:`.io`: atomic writes, output transactions, JSON/CSV/``.npz`` writers, file modes;
* :mod:`.provenance`: UTC timestamps and the code version recorded with results.

Tests that replace a helper (``_read_proc_stat``, ``_replace``, ...) patch the module that holds it.
"""

from .devices import (
    MEMORY_SHARE,
    available_memory,
    format_bytes,
    logmeanexp,
    make_generator,
    memory_shortfall,
    resolve_device,
    stream_generator,
)
from .io import (
    OutputTransaction,
    atomic_path,
    current_umask,
    default_file_mode,
    file_sha256,
    output_target,
    output_transaction,
    publish_outputs,
    save_npz_atomic,
    transactional,
    write_csv_atomic,
    write_json_atomic,
)
from .provenance import code_version, utc_now
from .threads import BUSY_INTERVAL, THREADS_ENV, choose_threads, set_threads, usable_cpus, using_threads

__all__ = [
    "BUSY_INTERVAL",
    "MEMORY_SHARE",
    "THREADS_ENV",
    "OutputTransaction",
    "atomic_path",
    "available_memory",
    "choose_threads",
    "code_version",
    "current_umask",
    "default_file_mode",
    "file_sha256",
    "format_bytes",
    "logmeanexp",
    "make_generator",
    "memory_shortfall",
    "output_target",
    "output_transaction",
    "publish_outputs",
    "resolve_device",
    "save_npz_atomic",
    "set_threads",
    "stream_generator",
    "transactional",
    "usable_cpus",
    "using_threads",
    "utc_now",
    "write_csv_atomic",
    "write_json_atomic",
]
