#!/usr/bin/env python3
"""Writes a small random-weight llama-architecture GGUF that llama.cpp's server loads.

    python make_gguf.py OUT.gguf [--embd 64] [--layers 2] [--heads 4] [--ctx 512] [--words 1000]

The model has no knowledge; it exists so a real server does real work (tokenizing, prefill,
a KV cache, decoding) at a speed a 2-core machine can measure. Two things are arranged so a
benchmark sees a well-behaved server:

- every generated token is a word piece (" w123"): byte and control tokens get a large negative
  logit through one residual dimension that no layer writes to, so no request ends early on an
  end-of-sequence token and no invalid UTF-8 is streamed;
- the vocabulary is SentencePiece-style ("llama" tokenizer: <unk>, <s>, </s>, 256 byte tokens,
  printable ASCII, "▁" and N words), so any prompt tokenizes.

A ChatML chat template is included so /v1/chat/completions has a template to render.
"""

import argparse

import gguf
import numpy as np

WORD_BIAS = 3.0
SPECIAL_BIAS = -30.0
RESIDUAL_CONSTANT = 4.0


def vocabulary(words):
    """(tokens, scores, types, number of never-sampled leading tokens)."""
    entries = [
        ("<unk>", 0.0, gguf.TokenType.UNKNOWN),
        ("<s>", 0.0, gguf.TokenType.CONTROL),
        ("</s>", 0.0, gguf.TokenType.CONTROL),
    ]
    entries += [(f"<0x{byte:02X}>", 0.0, gguf.TokenType.BYTE) for byte in range(256)]
    never_sampled = len(entries)
    entries.append(("\u2581", -1.0, gguf.TokenType.NORMAL))
    entries += [(chr(code), -1.0, gguf.TokenType.NORMAL) for code in range(33, 127)]
    entries += [(f"\u2581w{i}", -2.0 - i * 1e-3, gguf.TokenType.NORMAL) for i in range(words)]
    tokens, scores, types = (list(column) for column in zip(*entries))
    return tokens, scores, types, never_sampled


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("--embd", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--words", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    embd, ff = args.embd, 4 * args.embd
    rng = np.random.default_rng(args.seed)
    tokens, scores, types, never_sampled = vocabulary(args.words)
    vocab = len(tokens)

    def random(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    writer = gguf.GGUFWriter(args.out, "llama")
    writer.add_name("gpuflow-random-llama")
    writer.add_context_length(args.ctx)
    writer.add_embedding_length(embd)
    writer.add_block_count(args.layers)
    writer.add_feed_forward_length(ff)
    writer.add_head_count(args.heads)
    writer.add_head_count_kv(args.heads)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(embd // args.heads)
    writer.add_rope_freq_base(10000.0)
    writer.add_vocab_size(vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_chat_template(
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
        "{{ message['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )

    # Linear weights are (out, in) in numpy order. Residual dimension 0 carries a constant from
    # the embedding to the output head: attention and feed-forward outputs never write row 0.
    embedding = random(vocab, embd, 0.5)
    embedding[:, 0] = RESIDUAL_CONSTANT
    writer.add_tensor("token_embd.weight", embedding)
    for layer in range(args.layers):
        prefix = f"blk.{layer}."
        writer.add_tensor(prefix + "attn_norm.weight", np.ones(embd, np.float32))
        for name in ("attn_q", "attn_k", "attn_v"):
            writer.add_tensor(prefix + name + ".weight", random(embd, embd, 0.2))
        attention_out = random(embd, embd, 0.05)
        attention_out[0, :] = 0.0
        writer.add_tensor(prefix + "attn_output.weight", attention_out)
        writer.add_tensor(prefix + "ffn_norm.weight", np.ones(embd, np.float32))
        writer.add_tensor(prefix + "ffn_gate.weight", random(ff, embd, 0.2))
        writer.add_tensor(prefix + "ffn_up.weight", random(ff, embd, 0.2))
        down = random(embd, ff, 0.05)
        down[0, :] = 0.0
        writer.add_tensor(prefix + "ffn_down.weight", down)
    writer.add_tensor("output_norm.weight", np.ones(embd, np.float32))
    head = random(vocab, embd, 1.0)
    head[:never_sampled, 0] = SPECIAL_BIAS
    head[never_sampled:, 0] = WORD_BIAS
    writer.add_tensor("output.weight", head)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    print(f"wrote {args.out}: {vocab} tokens, {embd} wide, {args.layers} layers, context {args.ctx}")


if __name__ == "__main__":
    main()
