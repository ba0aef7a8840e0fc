"""A language model small enough to train on a CPU in seconds, and its data, all made here.

Nothing is downloaded: the tokenizer is character-level, built from ``tokenizers``' WordLevel
model over a fixed alphabet, the model is a GPT-2 built from a ``GPT2Config`` (2 layers of
width 32 by default), and the corpus is sums written out (``"37+48=85"``), generated from a
seed. A model that learns the task has to learn to add, so the loss keeps falling for a
long time.
"""

import random

import torch
import transformers
from tokenizers import Regex, Tokenizer, models, pre_tokenizers

ALPHABET = "0123456789+= "
PAD, EOS = "<pad>", "<eos>"


def build_tokenizer() -> transformers.PreTrainedTokenizerFast:
    """One token per character of ``ALPHABET``, plus padding and end of text."""
    vocab = {token: i for i, token in enumerate([PAD, EOS, *ALPHABET])}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=PAD))
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    return transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token=PAD, eos_token=EOS, bos_token=EOS
    )


def build_model(
    tokenizer: transformers.PreTrainedTokenizerFast,
    *,
    n_layer: int = 2,
    n_embd: int = 32,
    n_head: int = 2,
    n_positions: int = 32,
    seed: int = 0,
) -> transformers.GPT2LMHeadModel:
    """A GPT-2 language model with freshly initialized weights (seeded)."""
    config = transformers.GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=n_positions,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    return transformers.GPT2LMHeadModel(config)


def sums(count: int, seed: int) -> list[tuple[str, str]]:
    """``count`` additions as ``(prompt, answer)``: ``("37+48=", "85")``."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        a, b = rng.randrange(100), rng.randrange(100)
        out.append((f"{a}+{b}=", str(a + b)))
    return out


class SumsDataset(torch.utils.data.Dataset):
    """Tokenized sums for causal language modeling: ``input_ids``, ``attention_mask`` and
    ``labels`` (the input, with padding masked out of the loss)."""

    def __init__(
        self, tokenizer: transformers.PreTrainedTokenizerFast, count: int, seed: int, length: int
    ) -> None:
        texts = [prompt + answer + EOS for prompt, answer in sums(count, seed)]
        enc = tokenizer(texts, padding="max_length", max_length=length, truncation=True)
        self.input_ids = torch.tensor(enc["input_ids"])
        self.attention_mask = torch.tensor(enc["attention_mask"])

    def __len__(self) -> int:
        return len(self.input_ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        ids, mask = self.input_ids[i], self.attention_mask[i]
        return {
            "input_ids": ids,
            "attention_mask": mask,
            "labels": ids.masked_fill(mask == 0, -100),
        }
