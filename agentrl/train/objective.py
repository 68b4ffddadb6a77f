"""The training objective of one micro-batch, built from `TrainerConfig`: policy loss, importance weights, KL and
entropy terms, aggregated over the loss mask.

    loss = agg(w_t · L_policy(ρ_t, A'_t)) + β·agg(KL_t) − c_H·agg(H_t)

- L_policy is `trainer.loss` (`losses.py`), ρ_t = π_θ / π_old; w_t the sampler-mismatch weight of
  `trainer.tis_mode` (1 with `tis_cap = 0`, `importance.py`); agg is `trainer.loss_agg` (`aggregation.py`).
- KL_t is `trainer.kl_estimator` of KL(π_θ ‖ π_ref) (`kl.py`) with β = `kl_coef`. With `kl_in_reward` the term
  leaves the loss and enters the advantage instead: A'_t = A_t − β·Σ_{s ≥ t} KL_s, the KL estimated at π_old (the
  weights that sampled the batch, so it is a fixed reward for every epoch), summed over the later policy tokens
  of the trajectory. Otherwise A'_t = A_t, the credited and normalised advantage.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Collection
from typing import Any

from torch import Tensor

from agentrl.errors import ConfigError
from agentrl.registry import resolve
from agentrl.train.aggregation import AGGREGATION_MODES, aggregate
from agentrl.train.config import TrainerConfig
from agentrl.train.fsdp import check_sharding
from agentrl.train.importance import TIS_MODES, importance_weights
from agentrl.train.kl import KL_ESTIMATORS, kl_estimate, kl_penalty_to_go
from agentrl.train.losses import OFF_POLICY_LOSSES
from agentrl.train.samples import PaddedSamples


def check_trainer_config(config: TrainerConfig) -> None:
    """Refuse settings the objective cannot honour, naming the key to change (ConfigError)."""
    _check_choice("loss_agg", config.loss_agg, AGGREGATION_MODES)
    _check_choice("tis_mode", config.tis_mode, TIS_MODES)
    _check_choice("kl_estimator", config.kl_estimator, KL_ESTIMATORS)
    check_sharding(config)
    if config.update_epochs < 1 or config.minibatches_per_step < 1:
        raise ConfigError("trainer.update_epochs and trainer.minibatches_per_step must be >= 1")
    if config.loss_agg_norm_tokens < 0 or (config.tis_cap or 0.0) < 0 or config.tis_floor < 0:
        raise ConfigError("trainer.loss_agg_norm_tokens, trainer.tis_cap and trainer.tis_floor must be >= 0")
    if config.tis_floor > 0 and not (config.tis_mode.endswith("_mask") and config.tis_floor < (config.tis_cap or 0.0)):
        raise ConfigError(
            "trainer.tis_floor needs trainer.tis_mode=token_mask or sequence_mask and trainer.tis_cap > tis_floor"
        )
    if not 0 < config.cov_token_fraction <= 1:
        raise ConfigError("trainer.cov_token_fraction must be in (0, 1]")
    if config.kl_in_reward and config.kl_coef <= 0:
        raise ConfigError("trainer.kl_in_reward needs trainer.kl_coef > 0 (the penalty's weight)")
    if config.loss in OFF_POLICY_LOSSES and config.minibatches_per_step * config.update_epochs == 1:
        raise ConfigError(
            f"trainer.loss={config.loss} differs from the plain policy gradient only where π_θ / π_old ≠ 1, and with "
            "one optimizer step per batch (trainer.minibatches_per_step=1, trainer.update_epochs=1) it is always 1: "
            "set trainer.minibatches_per_step or trainer.update_epochs >= 2, or use trainer.loss=ppo_clip"
        )


def _check_choice(key: str, value: str, known: Collection[str]) -> None:
    if value not in known:
        raise ConfigError(f"unknown trainer.{key} {value!r}; known: {', '.join(known)}")


def _masked_sum(values_B_T: Tensor, mask_B_T: Tensor) -> Tensor:
    """Σ over the mask, detached, on the device: metrics are read back once per update, not per micro-batch."""
    return values_B_T.detach().where(mask_B_T, 0.0).sum()


def _accumulate(token_sums: dict[str, Any], name: str, value: Tensor) -> None:
    token_sums[name] = token_sums[name] + value if name in token_sums else value


class Objective:
    """Computes one micro-batch's (loss, policy loss) and adds its per-token statistics to `token_sums`.

    `norm_tokens` is Dr. GRPO's constant: `trainer.loss_agg_norm_tokens`, or the episode token budget when 0 (one
    of the two must be given for `loss_agg = seq-mean-token-sum-norm`). `token_sums` gets 0-d tensors on the
    device.
    Keyword options the policy loss declares (`cov_token_fraction`, `clip_cov_bounds`, `kl_cov_coef`,
    `sequence_clip_low`, `sequence_clip_high`) are passed from the config fields of the same name.
    """

    def __init__(self, config: TrainerConfig, *, episode_token_budget: int | None = None) -> None:
        check_trainer_config(config)
        self.config = config
        self.norm_tokens = config.loss_agg_norm_tokens or episode_token_budget or 0
        if config.loss_agg == "seq-mean-token-sum-norm" and self.norm_tokens <= 0:
            raise ConfigError(
                "trainer.loss_agg=seq-mean-token-sum-norm needs its constant: set trainer.loss_agg_norm_tokens (the "
                "trainer passes rollout.max_tokens_per_episode)"
            )
        self.policy_loss = resolve("loss", config.loss)
        declared = inspect.signature(self.policy_loss).parameters
        options = {
            "cov_token_fraction": config.cov_token_fraction,
            "clip_cov_bounds": tuple(config.clip_cov_bounds),
            "kl_cov_coef": config.kl_cov_coef,
            "sequence_clip_low": config.sequence_clip_low,
            "sequence_clip_high": config.sequence_clip_high,
        }
        self.loss_options = {name: value for name, value in options.items() if name in declared}

    @property
    def needs_reference(self) -> bool:
        """Whether a step needs the reference policy's log-probs."""
        return self.config.kl_coef > 0

    def __call__(
        self,
        batch: PaddedSamples,
        logprobs_B_T1: Tensor,
        old_B_T1: Tensor,
        entropy_B_T1: Tensor | None,
        ref_B_T1: Tensor | None,
        totals: dict[str, int],
        token_sums: dict[str, Any],
    ) -> tuple[Tensor, Tensor]:
        """(total loss, policy loss) of `batch`, each its share of the mini-batch whose `totals` it is given;
        `old_B_T1` is π_old, `ref_B_T1` the reference's log-probs (None without a KL term)."""
        config, mask_B_T1 = self.config, batch.mask_B_T1
        agg = functools.partial(
            aggregate, mask_B_T=mask_B_T1, mode=config.loss_agg, norm_tokens=self.norm_tokens, **totals
        )
        advantages_B_T1 = batch.advantages_B_T1
        kl_loss_B_T1 = None
        if ref_B_T1 is not None and config.kl_in_reward:
            kl_B_T1 = kl_estimate(config.kl_estimator, old_B_T1, ref_B_T1).detach()
            advantages_B_T1 = advantages_B_T1 - config.kl_coef * kl_penalty_to_go(kl_B_T1, mask_B_T1)
            _accumulate(token_sums, "kl", _masked_sum(kl_B_T1, mask_B_T1))
        elif ref_B_T1 is not None:
            kl_loss_B_T1 = kl_estimate(config.kl_estimator, logprobs_B_T1, ref_B_T1)
            _accumulate(token_sums, "kl", _masked_sum(kl_loss_B_T1, mask_B_T1))
        loss_B_T1, stats = self.policy_loss(
            logprobs_B_T1,
            old_B_T1,
            advantages_B_T1,
            clip_low=config.clip_low,
            clip_high=config.clip_high,
            dual_clip=config.dual_clip,
            mask_B_T=mask_B_T1,
            **self.loss_options,
        )
        if config.tis_cap:
            weights_B_T1, over_cap_B_T1 = importance_weights(
                config.tis_mode, old_B_T1, batch.sampler_logprobs_B_T1, mask_B_T1, config.tis_cap, config.tis_floor
            )
            loss_B_T1 = loss_B_T1 * weights_B_T1
            _accumulate(token_sums, "tis_weight", _masked_sum(weights_B_T1, mask_B_T1))
            _accumulate(token_sums, "tis_capped_frac", _masked_sum(over_cap_B_T1, mask_B_T1))
        pg_loss = agg(loss_B_T1)
        loss = pg_loss
        if kl_loss_B_T1 is not None:
            loss = loss + config.kl_coef * agg(kl_loss_B_T1)
        if config.entropy_coef > 0 and entropy_B_T1 is not None:
            loss = loss - config.entropy_coef * agg(entropy_B_T1)
        if entropy_B_T1 is not None:
            _accumulate(token_sums, "entropy", _masked_sum(entropy_B_T1, mask_B_T1))
        _accumulate(token_sums, "sampler_entropy", _masked_sum(batch.sampler_entropies_B_T1, mask_B_T1))
        _add_stats(stats, mask_B_T1, token_sums)
        return loss, pg_loss


def _add_stats(stats: dict[str, Any], mask_B_T1: Tensor, token_sums: dict[str, Any]) -> None:
    # The ratio itself is not a rate; every other statistic is a 0/1 indicator averaged over the loss tokens.
    for name, values_B_T1 in stats.items():
        if name != "ratio":
            _accumulate(token_sums, name, _masked_sum(values_B_T1, mask_B_T1))
