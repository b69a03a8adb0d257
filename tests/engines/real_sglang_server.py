"""Makes the tiny random Llama of real_sglang.py with a word-level tokenizer ("t<k>" is token k) and a chat template, so that `python -m sglang.launch_server --device cpu` serves /generate and /v1/chat/completions from it (tests/engines/test_sglang_real.py)."""

import sys


def make(path):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=512, torch_dtype="bfloat16", bos_token_id=1,
                      eos_token_id=2)
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(path)
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab.update(("t%d" % k, k) for k in range(3, 256))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    t = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    t.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    t.save_pretrained(path)


if __name__ == "__main__":
    make(sys.argv[1])
