"""The resolver's decisions for DAPO dynamic sampling (``algorithm.filter_groups``)."""

from kuberl_api.backend_config import BackendConfig
from kuberl_api.backend_config.algorithm import AlgorithmConfig
from kuberl_api.plan.sections import FilterGroupsPlan

FILTER_OFF = FilterGroupsPlan(enable=False, metric="", max_num_gen_batches=0)


def filter_groups_section(algorithm: AlgorithmConfig) -> FilterGroupsPlan:
    """The filter as the runtime applies it; off is one plan whatever the other keys say."""
    options = algorithm.filter_groups
    if not options.enable:
        return FILTER_OFF
    assert options.metric, "validation refuses filter_groups.enable without a metric"
    return FilterGroupsPlan(
        enable=True,
        metric=options.metric,
        max_num_gen_batches=max(options.max_num_gen_batches, 0),
    )


def gen_batch_size(cfg: BackendConfig) -> int:
    """Prompts per generation batch: ``data.gen_batch_size`` with the filter on (verl's DAPO
    trainer draws that many per batch), else one training batch."""
    data = cfg.data
    if cfg.algorithm.filter_groups.enable and data.gen_batch_size:
        return data.gen_batch_size
    return data.train_batch_size
