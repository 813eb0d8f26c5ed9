"""Exceptions raised on bad input.  Every one names the problem it found."""


class LogzbenchError(Exception):
    """Base class for all errors raised deliberately by logzbench."""


class ModelFileError(LogzbenchError, ValueError):
    """A model file is missing, malformed, or holds non-finite / overflowing parameters."""


class DatasetError(LogzbenchError, RuntimeError):
    """A dataset file is missing, corrupt (checksum mismatch) or cannot be obtained."""


class EstimatorError(LogzbenchError, RuntimeError):
    """An estimator produced an invalid result (e.g. a log-weight overflowed or became NaN)."""


class ConfigError(LogzbenchError, ValueError):
    """A workflow config that cannot be run (see :func:`logzbench.pipeline.config.check_config`)."""


class TrackingError(LogzbenchError, RuntimeError):
    """The MLflow tracking store or server cannot be reached (after bounded retries) or is misconfigured."""


class OutputError(LogzbenchError, OSError):
    """An output file cannot be written (disk full, read-only file system, a special file such as a
    FIFO or a device, an unresolvable symlink); the message names the path.  Nothing was written:
    see :func:`logzbench.utils.atomic_path` and :func:`logzbench.utils.output_transaction`.
    ``reason``: what is wrong, without the path (for a message that names the option instead)."""

    reason: str = ""
