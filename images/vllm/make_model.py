"""A tiny random-weight Llama and a tokenizer, made locally: the model real vLLM serves in the
tests (no model hub is reachable here).

    python make_model.py OUT_DIR [--layers 2] [--hidden 128] [--context 2048]

The tokenizer is a byte-level BPE trained on words generated here, saved as a
`PreTrainedTokenizerFast` with a chat template. The output layer is shaped so that sampling
picks printable tokens and never the end-of-sequence one: every request runs to `max_tokens`
(`finish_reason: "length"`), as the benchmarks count on. Deterministic: seeded.
"""

import argparse
import random

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

SPECIAL = ["<s>", "</s>", "<unk>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'user' %}<|user|>{% else %}<|assistant|>{% endif %}"
    "{{ message['content'] }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def corpus(seed: int, words: int):
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    vocab = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 8))) for _ in range(words)]
    for _ in range(2000):
        yield " ".join(rng.choice(vocab) for _ in range(24)) + "."


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--context", type=int, default=2048)
    p.add_argument("--vocab", type=int, default=512)
    a = p.parse_args()
    torch.manual_seed(0)

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=a.vocab,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus(0, 300), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
        model_max_length=a.context,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(a.out)

    vocab = tok.get_vocab_size()
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=a.hidden,
        intermediate_size=a.hidden * 2,
        num_hidden_layers=a.layers,
        num_attention_heads=a.heads,
        num_key_value_heads=a.kv_heads,
        max_position_embeddings=a.context,
        bos_token_id=tok.token_to_id("<s>"),
        eos_token_id=tok.token_to_id("</s>"),
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        # Rows of special tokens, and of tokens that are not whole printable ASCII text (a
        # byte-level token of a multi-byte character streams as an empty delta until its
        # character completes), zero; the others large: the zero logits are far below the
        # maximum of the others, so those tokens are never sampled and every sampled token
        # streams as one non-empty chunk.
        weight = model.lm_head.weight
        weight.normal_(0.0, 4.0)
        for token, index in tok.get_vocab().items():
            text = tok.decode([index])
            whole_ascii = text.strip() and text.isascii() and text.isprintable()
            if token in SPECIAL or not whole_ascii:
                weight[index].zero_()
    model.save_pretrained(a.out, safe_serialization=True)


if __name__ == "__main__":
    main()
