"""A small instruct-shaped model saved inside a test: a random Llama, a byte-level BPE tokenizer trained here and a
ChatML chat template, as SmolLM2-135M-Instruct has them (seconds to build, nothing downloaded).

    path = save_chat_llama(tmp_path / "chat-llama")
    path = save_chat_llama(tmp_path / "no-template", chat_template=False)
"""

from __future__ import annotations

from pathlib import Path

# SmolLM2-Instruct's template, shortened: a turn is <|im_start|>role\ncontent<|im_end|>\n
CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CORPUS = [
    "Tom has 3 apples and buys 4 more. How many apples does he have now?",
    "A box holds 12 pens. Ann takes 5 of them. How many pens are left in the box?",
    "Solve the problem step by step, then give the final answer after ####.",
    "3 + 4 = 7 so he has 7 apples.\n#### 7",
    "You are a helpful assistant. system user assistant",
] + [f"{a} + {b} = {a + b}\n#### {a + b}" for a in range(20) for b in range(20)]


def bpe_tokenizer(chat_template: bool = True, eos_token: str | None = "<|im_end|>"):
    """A byte-level BPE tokenizer with ChatML's special tokens; <|im_end|> ends a turn, and (by default) a sequence."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE(unk_token=None))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=512,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(CORPUS, trainer)
    specials = {"pad_token": "<|endoftext|>", "bos_token": "<|im_start|>"}
    if eos_token:
        specials["eos_token"] = eos_token
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, **specials)
    if chat_template:
        tokenizer.chat_template = CHATML
    return tokenizer


def save_chat_llama(
    path: Path, *, chat_template: bool = True, eos: bool = True, eos_token: str = "<|im_end|>", seed: int = 0
) -> Path:
    """A random Llama and its tokenizer, written by save_pretrained into `path`; eos=False: no end-of-sequence token
    anywhere."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = bpe_tokenizer(chat_template=chat_template, eos_token=eos_token if eos else None)
    hidden_size = 32
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.convert_tokens_to_ids("<|im_start|>"),
        eos_token_id=tokenizer.eos_token_id if eos else None,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return Path(path)
