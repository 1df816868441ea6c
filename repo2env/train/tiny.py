"""A tiny tool-calling policy built on this machine: no weights are downloaded.

A byte-level BPE tokenizer trained with ``tokenizers`` on the texts the model will see, Qwen2.5's
chat template (TRL recognises it and parses ``<tool_call>`` blocks), a randomly initialised Qwen2
causal LM of a few layers, and a few hundred CPU steps of supervised fine-tuning on conversations
that call a tool. A random model never emits a well-formed tool call, so without that teaching TRL
would never execute RepoEnv's tools; with it, GRPO sees real tool use and real rewards.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
#: Tags the chat template writes around tool calls; plain (non-special) tokens, so the decoded
#: completion keeps them and TRL's parser finds them.
TOOL_TAGS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>")


@dataclass(frozen=True)
class TinyModelConfig:
    """Size of the tiny policy (a Qwen2 architecture, randomly initialised)."""

    hidden_size: int = 64
    layers: int = 2
    heads: int = 4
    vocab_size: int = 4096
    max_positions: int = 4096
    seed: int = 0


def repo_env_tools() -> list[dict[str, Any]]:
    """RepoEnv's tools exactly as TRL renders them into the prompt (the JSON schema transformers
    derives from each public method, in TRL's order), so a taught prompt is the prompt GRPO shows."""
    import inspect

    from transformers.utils import get_json_schema

    from repo2env.envs import RepoEnv

    # Bound methods of an uninitialised instance: the schemas need signatures, not a Docker engine.
    bare = object.__new__(RepoEnv)
    return [get_json_schema(getattr(bare, name)) for name, _ in inspect.getmembers(RepoEnv, inspect.isfunction)
            if not name.startswith("_") and name not in ("reset", "get_reward")]


def hunk_replacements(patch: str) -> list[tuple[str, str, str]]:
    """Each hunk of a unified diff as a ``str_replace`` call: (path, old text, new text), where the
    old text is the hunk's removed lines with the context between them (a short, exact edit a tiny
    model can learn to emit, unlike a whole patch). Hunks that only add lines are left out."""
    from repo2env.patches import parse

    replacements = []
    for file in parse(patch).files:
        for hunk in file.hunks:
            lines = [line for line in hunk.lines if not line.startswith("\\")]
            changed = [index for index, line in enumerate(lines) if line.startswith(("+", "-"))]
            if not any(line.startswith("-") for line in lines):
                continue
            span = lines[changed[0]:changed[-1] + 1]
            old = "".join(line[1:] for line in span if not line.startswith("+"))
            new = "".join(line[1:] for line in span if not line.startswith("-"))
            replacements.append((file.path, old, new))
    return replacements


def tool_call_turn(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An assistant message calling one tool, in the chat format transformers' templates take."""
    return {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": arguments}}]}


def build_tokenizer(corpus: Sequence[str], config: TinyModelConfig = TinyModelConfig()):
    """A fast tokenizer trained on ``corpus`` with Qwen2.5's chat template (tool calls supported)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen2_5_chat_template

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=config.vocab_size, special_tokens=list(SPECIAL_TOKENS),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    backend.train_from_iterator(list(corpus), trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        padding_side="left")
    tokenizer.add_tokens(list(TOOL_TAGS))
    tokenizer.chat_template = qwen2_5_chat_template
    return tokenizer


def build_model(tokenizer, config: TinyModelConfig = TinyModelConfig()):
    """A randomly initialised Qwen2 causal LM sized by ``config`` for ``tokenizer``."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig, Qwen2Config

    torch.manual_seed(config.seed)
    model_config = Qwen2Config(
        vocab_size=len(tokenizer), hidden_size=config.hidden_size, intermediate_size=config.hidden_size * 4,
        num_hidden_layers=config.layers, num_attention_heads=config.heads, num_key_value_heads=config.heads,
        max_position_embeddings=config.max_positions, tie_word_embeddings=True,
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = AutoModelForCausalLM.from_config(model_config)
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    return model


def chat_corpus(conversations: Sequence[Sequence[dict[str, Any]]], tools: Sequence[dict[str, Any]]) -> list[str]:
    """Texts to train the tokenizer on: the conversations as the chat template renders them (with
    the tool schemas), so the prompts TRL builds tokenise into few tokens."""
    from jinja2 import Environment
    from trl.chat_template_utils import qwen2_5_chat_template

    template = Environment().from_string(qwen2_5_chat_template)  # the tokenizer does not exist yet
    texts = [template.render(messages=list(conversation), tools=list(tools), add_generation_prompt=False)
             for conversation in conversations]
    return texts + [json.dumps(tool) for tool in tools]


def teach(model, tokenizer, examples: Sequence[tuple[Sequence[dict[str, Any]], Sequence[dict[str, Any]]]],
          tools: Sequence[dict[str, Any]], *, steps: int = 200, learning_rate: float = 3e-3, seed: int = 0) -> list[float]:
    """Supervised fine-tuning on (prompt messages, answer messages) pairs: the loss covers the answer
    only. One example per step, each once per shuffled round, so a prompt taught two answers learns
    both about equally (a policy whose group of rollouts can differ). Returns the loss per step."""
    import torch

    rng = random.Random(seed)
    encoded = []
    for prompt, answer in examples:
        prompt_ids = tokenizer.apply_chat_template(list(prompt), tools=list(tools), add_generation_prompt=True,
                                                   tokenize=True, return_dict=True)["input_ids"]
        full_ids = tokenizer.apply_chat_template(list(prompt) + list(answer), tools=list(tools), tokenize=True,
                                                 return_dict=True)["input_ids"]
        if full_ids[:len(prompt_ids)] != prompt_ids:
            raise ValueError("the chat template renders the prompt differently inside the conversation")
        labels = [-100] * len(prompt_ids) + full_ids[len(prompt_ids):]
        encoded.append((torch.tensor([full_ids]), torch.tensor([labels])))
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    model.train()
    losses = []
    order: list[int] = []
    for _ in range(steps):
        if not order:  # every example once per round, shuffled: two answers to one prompt stay balanced
            order = rng.sample(range(len(encoded)), len(encoded))
        input_ids, labels = encoded[order.pop()]
        loss = model(input_ids=input_ids, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    model.eval()
    return losses
