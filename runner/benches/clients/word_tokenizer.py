"""Writes a word-level HuggingFace tokenizer to a directory, with no network.

One token is one whitespace-separated word, which is how gpuflow-sim counts tokens, so the
prompt lengths AIPerf and inference-perf generate are the lengths the simulator sees.
"""

import json
import sys
from pathlib import Path

from tokenizers import Tokenizer, models, pre_tokenizers

VOCAB_SIZE = 4096


def main(out: Path) -> None:
    vocab = {"[UNK]": 0}
    vocab.update({f"w{i}": i for i in range(1, VOCAB_SIZE)})
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(out / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": "[UNK]",
        "model_max_length": 1_000_000,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
