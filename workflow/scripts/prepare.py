"""Prepare one dataset (rule prepare_dataset): logzbench.data.prepare_dataset."""

import sys

sys.stdout = sys.stderr = open(snakemake.log[0], "w", buffering=1)  # noqa: F821

import torch  # noqa: E402

from logzbench.data import CONTINUOUS_DATASETS, prepare_dataset, prepare_patches  # noqa: E402

torch.set_num_threads(snakemake.threads)  # noqa: F821
spec = dict(snakemake.params.spec)  # noqa: F821
source = spec.pop("source")
if source in CONTINUOUS_DATASETS:  # whitened image patches
    path = prepare_patches(source, snakemake.output[0], mirror=snakemake.params.mirror,  # noqa: F821
                           **{k: v for k, v in spec.items() if k not in ("binarize", "threshold", "n_valid")})
else:
    path = prepare_dataset(source, snakemake.output[0], mirror=snakemake.params.mirror, **spec)  # noqa: F821
print(f"prepared {source} -> {path} (mirror {snakemake.params.mirror}, {spec})")  # noqa: F821
