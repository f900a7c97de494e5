"""A tiny byte-level BPE tokenizer trained locally on arithmetic problems (no download).

Byte-level, so any text round-trips; digits are split one per token so numbers are spelled
digit by digit; special tokens follow Qwen2's names (`<|endoftext|>` pad, `<|im_end|>` eos) and
the chat template is ChatML, as in Qwen2 models.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from kuberl_runtime.testing.arith import DIFFICULTIES, INSTRUCTION, generate_problem

PAD_TOKEN = "<|endoftext|>"
IM_START = "<|im_start|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, IM_START, EOS_TOKEN)
DEFAULT_VOCAB_SIZE = 512

CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_GENERAL_TEXT = (
    "system user assistant The answer is Let's think step by step. "
    "The quick brown fox jumps over the lazy dog. 0123456789 + - * / = ( ) , . ? ! $ % #### "
    "You are a helpful assistant."
)


def build_arith_tokenizer(
    vocab_size: int = DEFAULT_VOCAB_SIZE, num_problems: int = 2000, seed: int = 0
) -> PreTrainedTokenizerFast:
    """Train the tokenizer and wrap it as a Hugging Face fast tokenizer with a chat template."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        # All 256 byte symbols up front: nothing is ever out of vocabulary.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(_corpus(num_problems, seed), trainer=trainer)
    wrapped = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD_TOKEN,
        eos_token=EOS_TOKEN,
        additional_special_tokens=[IM_START],
        model_max_length=2048,
    )
    wrapped.chat_template = CHAT_TEMPLATE
    return wrapped


def save_arith_tokenizer(out_dir: str | Path, **kwargs: int) -> Path:
    out = Path(out_dir)
    build_arith_tokenizer(**kwargs).save_pretrained(out)
    return out


def _corpus(num_problems: int, seed: int) -> Iterator[str]:
    rng = random.Random(seed)
    yield _GENERAL_TEXT
    for i in range(num_problems):
        problem = generate_problem(rng, DIFFICULTIES[i % len(DIFFICULTIES)])
        yield f"{IM_START}user\n{problem.question} {INSTRUCTION}{EOS_TOKEN}\n"
        yield f"{IM_START}assistant\n{problem.solution}{EOS_TOKEN}\n"
