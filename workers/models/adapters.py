"""LoRA adapters (peft) on a pretrained policy, and the reference policy such a run needs no copy for.

With `model.lora_rank` above 0 only low-rank adapters on `model.lora_target_modules` train (a 135M model's
update then touches about 1% of its parameters, and the optimizer keeps moments for those alone). The KL
reference is the initial policy, and the initial policy is the base network with its adapters switched off:
`WithoutAdapters(model)` scores with them off, so a run holds one network, not two.

    model = with_adapters(model, cfg.model)   # a peft model whose base weights are frozen
    reference = WithoutAdapters(model)        # called like the model; no gradient
"""

from __future__ import annotations

import torch


def with_adapters(model: torch.nn.Module, model_cfg) -> torch.nn.Module:
    from peft import LoraConfig, get_peft_model

    targets = model_cfg.lora_target_modules
    config = LoraConfig(
        r=model_cfg.lora_rank,
        lora_alpha=model_cfg.lora_alpha,
        lora_dropout=0.0,  # the sampler and the trainer must score a completion with the same network
        target_modules=targets if targets == "all-linear" else targets.split(","),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def has_adapters(model: torch.nn.Module) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


class WithoutAdapters:
    """The base network under a peft model: forwards with the adapters disabled and no gradient."""

    def __init__(self, model: torch.nn.Module):
        self.model = model

    def __call__(self, *args, **kwargs):
        with torch.no_grad(), self.model.disable_adapter():
            return self.model(*args, **kwargs)


def trainable_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """What a resume checkpoint keeps of the weights: everything, or with adapters the adapters alone (the base is
    the run's initial weights, which a resumed run loads again)."""
    if not has_adapters(model):
        return model.state_dict()
    return {name: p.detach() for name, p in model.named_parameters() if p.requires_grad}


def load_trainable_state(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> None:
    if not has_adapters(model):
        model.load_state_dict(state)
        return
    missing = [name for name, p in model.named_parameters() if p.requires_grad and name not in state]
    if missing:
        raise ValueError(f"the checkpoint holds no weights for {len(missing)} adapters ({missing[0]}, ...)")
    unexpected = model.load_state_dict(state, strict=False).unexpected_keys
    if unexpected:
        raise ValueError(f"the checkpoint holds {len(unexpected)} weights this model has not ({unexpected[0]}, ...)")
