"""bertcourse: BERT from the inside.

Readable PyTorch implementations of every part of BERT, one module per concept, that load
and produce the same numbers as Hugging Face transformers.

    attention  scaled dot-product and multi-head attention      (chapter 1)
    masks      padding masks and the additive attention bias     (chapter 2)
    mlm        masked-language-model sampling                    (chapter 3)
    losses     cross-entropy, MLM and NSP losses                 (chapter 4)
    nsp        sentence pairs for next-sentence prediction       (chapter 5)
    optim      Adam, AdamW, BERT's optimizer and schedules       (chapter 6)
    config, embeddings, encoder, heads, model                    (chapter 7)
    finetune   data, training and evaluation loops for fine-tuning (chapter 8)
    hf         weight conversion to and from transformers, MiniLM loader
    data       the front door of the pretraining data: corpus (documents), languages (a
               language as a configuration), vocab (load_tokenizer, the one tokenizer
               interface), textdata (the tokenized, cached corpus), loaders (batches)
    assets     where the shipped weights, vocabulary, corpus and the cache are
    pretrain   python -m bertcourse.pretrain (parts in pretraining/, distributed, fillmask)
    viz        the plots used by the book
"""

from bertcourse.config import BertConfig
from bertcourse.model import BertForPreTraining, BertForSequenceClassification, BertModel

__all__ = ["BertConfig", "BertModel", "BertForPreTraining", "BertForSequenceClassification"]
__version__ = "0.1.0"
