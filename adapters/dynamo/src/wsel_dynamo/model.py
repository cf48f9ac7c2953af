# SPDX-License-Identifier: Apache-2.0
"""A model folder for Dynamo's mocker engines without a model hub: a
tokenizer whose words are token ids ("17 4 9" is [17, 4, 9], as for
wsel-engine), a chat template joining the messages, and a config. The
mocker needs only the tokenizer and config; no weights exist."""
from __future__ import annotations

import json
import os


def write_model(folder: str, vocab: int = 32000) -> str:
    """Write the folder (created if missing); returns it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    os.makedirs(folder, exist_ok=True)
    tok = Tokenizer(models.WordLevel(vocab={str(i): i for i in range(vocab)}, unk_token="0"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    tok.save(os.path.join(folder, "tokenizer.json"))
    files = {
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "0", "eos_token": "1",
            "model_max_length": 1 << 20,
            "chat_template": "{% for m in messages %}{{ m['content'] }} {% endfor %}"},
        "config.json": {
            "architectures": ["LlamaForCausalLM"], "model_type": "llama",
            "vocab_size": vocab, "max_position_embeddings": 1 << 17,
            "bos_token_id": 0, "eos_token_id": 1, "hidden_size": 64,
            "num_attention_heads": 1, "num_key_value_heads": 1, "num_hidden_layers": 1,
            "intermediate_size": 64, "torch_dtype": "bfloat16"},
    }
    for name, body in files.items():
        with open(os.path.join(folder, name), "w", encoding="utf-8") as f:
            json.dump(body, f)
    return folder


if __name__ == "__main__":
    import sys
    print(write_model(sys.argv[1]))
