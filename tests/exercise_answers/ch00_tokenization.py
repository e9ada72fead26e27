# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch00_tokenization (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong split: ASCII punctuation only (string.punctuation misses ¿ and —)
# split: dev
# names: string.punctuation
def split_on_punctuation(word):
    import string

    pieces, start_new = [], True
    for char in word:
        if char in string.punctuation:
            pieces.append(char)
            start_new = True
        else:
            if start_new:
                pieces.append("")
                start_new = False
            pieces[-1] += char
    return pieces


# %% wrong split: a run of punctuation stays one word ("?!")
# split: eval
# names: a run of punctuation kept as one word
def split_on_punctuation(word):
    pieces, prev = [], None
    for char in word:
        kind = is_punctuation(char)
        if kind != prev:
            pieces.append("")
        pieces[-1] += char
        prev = kind
    return pieces


# %% wrong split: Unicode's punctuation categories only ($, ^, + are symbols there)
# split: dev
# names: Unicode's punctuation categories only
def split_on_punctuation(word):
    pieces, start_new = [], True
    for char in word:
        if unicodedata.category(char).startswith("P"):
            pieces.append(char)
            start_new = True
        else:
            if start_new:
                pieces.append("")
                start_new = False
            pieces[-1] += char
    return pieces


# %% alternative split: a regular expression over the punctuation characters of the word
def split_on_punctuation(word):
    import re

    punct = "".join(re.escape(c) for c in set(word) if is_punctuation(c))
    if not punct:
        return [word] if word else []
    return [piece for piece in re.split(f"([{punct}])", word) if piece]


# %% alternative split: glue a character to the last word unless either is punctuation
def split_on_punctuation(word):
    out = []
    for char in word:
        if is_punctuation(char) or not out or is_punctuation(out[-1][-1]):
            out.append(char)
        else:
            out[-1] += char
    return out


# %% wrong basic: accents kept
# split: dev
# names: the accents kept
def basic_tokenize(text):
    text = space_chinese_chars(clean_text(text)).lower()
    return [piece for word in text.split() for piece in split_on_punctuation(word)]


# %% wrong basic: Chinese characters not spaced
# split: dev
# names: the CJK ideographs not spaced
def basic_tokenize(text):
    text = clean_text(text)
    text = "".join(
        c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
    ).lower()
    return [piece for word in text.split() for piece in split_on_punctuation(word)]


# %% wrong basic: splits on single spaces (empty words survive)
# split: eval
def basic_tokenize(text):
    text = space_chinese_chars(clean_text(text))
    text = "".join(
        c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
    ).lower()
    return [piece for word in text.split(" ") for piece in (split_on_punctuation(word) or [word])]


# %% wrong basic: str.lower on the whole text (a word-final capital sigma becomes ς)
# split: eval
# names: str.lower on the whole text
def basic_tokenize(text):
    text = space_chinese_chars(clean_text(text))
    text = "".join(
        c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
    ).lower()
    return [piece for word in text.split() for piece in split_on_punctuation(word)]


# %% wrong basic: NFKD instead of NFD (ligatures, fractions and numerals rewritten)
# split: eval
# names: NFKD instead of NFD
def basic_tokenize(text):
    text = space_chinese_chars(clean_text(text))
    text = "".join(
        c for c in unicodedata.normalize("NFKD", text) if unicodedata.category(c) != "Mn"
    )
    text = "".join(c.lower() for c in text)
    return [piece for word in text.split() for piece in split_on_punctuation(word)]


# %% wrong basic: no lowercasing (a cased lookup)
# split: dev
# names: no lowercasing
def basic_tokenize(text):
    text = space_chinese_chars(clean_text(text))
    text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
    return [piece for word in text.split() for piece in split_on_punctuation(word)]


# %% wrong basic: drops every combining character (Mn, Mc and Me), not only Mn
# split: eval
def basic_tokenize(text):
    text = space_chinese_chars(clean_text(text))
    text = "".join(
        c for c in unicodedata.normalize("NFD", text) if not unicodedata.category(c).startswith("M")
    )
    text = "".join(c.lower() for c in text)
    return [piece for word in text.split() for piece in split_on_punctuation(word)]


# %% alternative basic: lowercase first (character by character), then strip accents per word
def basic_tokenize(text):
    words = "".join(c.lower() for c in space_chinese_chars(clean_text(text))).split()
    out = []
    for word in words:
        decomposed = unicodedata.normalize("NFD", word)
        out += split_on_punctuation(
            "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
        )
    return out


# %% wrong wordpiece: no ## prefix on continuation pieces
# split: dev
# names: no '##' on the pieces that continue a word
def wordpiece(word, vocab):
    vocab = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start and word[start:end] not in vocab:
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(word[start:end])
        start = end
    return pieces


# %% wrong wordpiece: the longest match taken from the end of the word (right to left)
# split: eval
# names: the longest match taken from the end of the word
def wordpiece(word, vocab):
    vocab = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces, end = [], len(word)
    while end > 0:
        start = 0
        while start < end:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            start += 1
        if start == end:
            return ["[UNK]"]
        pieces.insert(0, piece)
        end = start
    return pieces


# %% wrong wordpiece: the inner search stops one short (range's exclusive stop: the whole rest is never tried)
# split: dev
def wordpiece(word, vocab):
    vocab = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(len(word) - 1, start, -1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


# %% wrong wordpiece: keeps the pieces found before the gap, then [UNK]
# split: eval
# names: the pieces found before a gap kept
def wordpiece(word, vocab):
    vocab = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return pieces + ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


# %% wrong wordpiece: shortest match first
# split: eval
# names: the shortest match first
def wordpiece(word, vocab):
    vocab = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        for end in range(start + 1, len(word) + 1):
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
        else:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


# %% wrong wordpiece: "##" on the first piece too
# split: eval
# names: '##' on the first piece too
def wordpiece(word, vocab):
    vocab = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start and "##" + word[start:end] not in vocab:
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append("##" + word[start:end])
        start = end
    return pieces


# %% wrong wordpiece: a word of 100 characters is already [UNK] (>= instead of >)
# split: dev
# names: [UNK] for a word of exactly 100 characters
def wordpiece(word, vocab):
    vocab = set(vocab)
    if len(word) >= 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


# %% wrong wordpiece: the 100-character limit counted in UTF-8 bytes
# split: eval
# names: the length limit counted in UTF-8 bytes
def wordpiece(word, vocab):
    vocab = set(vocab)
    if len(word.encode("utf-8")) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


# %% wrong wordpiece: adds [UNK] to the caller's vocabulary list (modifies its input)
# split: dev
def wordpiece(word, vocab):
    if "[UNK]" not in vocab:
        vocab.append("[UNK]")
    known = set(vocab)
    if len(word) > 100:
        return ["[UNK]"]
    pieces, start = [], 0
    while start < len(word):
        end = len(word)
        while end > start:
            piece = word[start:end] if start == 0 else "##" + word[start:end]
            if piece in known:
                break
            end -= 1
        if end == start:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


# %% alternative wordpiece: a dict of pieces by length, cut from the longest possible length
def wordpiece(word, vocab):
    if len(word) > 100:
        return ["[UNK]"]
    known = frozenset(vocab)
    longest = max(map(len, known))
    pieces, start = [], 0
    while start < len(word):
        prefix = "##" if start else ""
        for end in range(min(len(word), start + longest), start, -1):
            if prefix + word[start:end] in known:
                pieces.append(prefix + word[start:end])
                start = end
                break
        else:
            return ["[UNK]"]
    return pieces


# %% alternative wordpiece: recursive, longest prefix first
def wordpiece(word, vocab):
    pieces = set(vocab)

    def cut(rest, prefix):
        if not rest:
            return []
        for end in range(len(rest), 0, -1):
            if prefix + rest[:end] in pieces:
                tail = cut(rest[end:], "##")
                return None if tail is None else [prefix + rest[:end]] + tail
        return None

    result = None if len(word) > 100 else cut(word, "")
    return ["[UNK]"] if result is None else result


# %% wrong pair: every token type is 0
# split: eval
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    places = max_length - 3
    a, b = list(ids_a), list(ids_b)
    if len(a) + len(b) > places:
        shorter = min(len(a), len(b))
        if shorter <= places - shorter:
            keep_a, keep_b = (
                (len(a), places - len(a)) if len(a) == shorter else (places - len(b), len(b))
            )
        else:
            half, odd = divmod(places, 2)
            keep_a, keep_b = (half + odd, half) if len(a) > len(b) else (half, half + odd)
        a, b = a[:keep_a], b[:keep_b]
    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": [0] * max_length,
        "attention_mask": [1] * len(input_ids) + [0] * n_pad,
    }


# %% wrong pair: truncation always cuts A first
# split: eval
# names: A truncated first
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    places = max_length - 3
    a, b = list(ids_a), list(ids_b)
    while len(a) + len(b) > places:
        if a:
            a.pop()
        else:
            b.pop()
    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * n_pad,
        "attention_mask": [1] * len(input_ids) + [0] * n_pad,
    }


# %% wrong pair: one token at a time from the longer (the legacy rule, B on ties)
# split: eval
# names: the original truncate_seq_pair
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    places = max_length - 3
    a, b = list(ids_a), list(ids_b)
    while len(a) + len(b) > places:
        if len(a) > len(b):
            a.pop()
        else:
            b.pop()
    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * n_pad,
        "attention_mask": [1] * len(input_ids) + [0] * n_pad,
    }


# %% wrong pair: padding counted in the attention mask
# split: eval
# names: padding counted in the attention mask
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    places = max_length - 3
    a, b = list(ids_a), list(ids_b)
    if len(a) + len(b) > places:
        shorter = min(len(a), len(b))
        if shorter <= places - shorter:
            keep_a, keep_b = (
                (len(a), places - len(a)) if len(a) == shorter else (places - len(b), len(b))
            )
        else:
            half, odd = divmod(places, 2)
            keep_a, keep_b = (half + odd, half) if len(a) > len(b) else (half, half + odd)
        a, b = a[:keep_a], b[:keep_b]
    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * n_pad,
        "attention_mask": [1] * max_length,
    }


# %% wrong pair: only the second text is truncated
# split: dev
# names: only the second text truncated
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    a, b = list(ids_a), list(ids_b)
    b = b[: max(0, max_length - 3 - len(a))]
    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * n_pad,
        "attention_mask": [1] * len(input_ids) + [0] * n_pad,
    }


# %% wrong pair: the last [SEP] typed as segment A
# split: dev
# names: the last [SEP] with token type 0
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    places = max_length - 3
    a, b = list(ids_a), list(ids_b)
    if len(a) + len(b) > places:
        shorter = min(len(a), len(b))
        if shorter <= places - shorter:
            keep_a, keep_b = (
                (len(a), places - len(a)) if len(a) == shorter else (places - len(b), len(b))
            )
        else:
            half, odd = divmod(places, 2)
            keep_a, keep_b = (half + odd, half) if len(a) > len(b) else (half, half + odd)
        a, b = a[:keep_a], b[:keep_b]
    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": [0] * (len(a) + 2) + [1] * len(b) + [0] + [0] * n_pad,
        "attention_mask": [1] * len(input_ids) + [0] * n_pad,
    }


# %% wrong pair: padding continues segment B's token type
# split: dev
# names: padding with token type 1
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    places = max_length - 3
    a, b = list(ids_a), list(ids_b)
    if len(a) + len(b) > places:
        shorter = min(len(a), len(b))
        if shorter <= places - shorter:
            keep_a, keep_b = (
                (len(a), places - len(a)) if len(a) == shorter else (places - len(b), len(b))
            )
        else:
            half, odd = divmod(places, 2)
            keep_a, keep_b = (half + odd, half) if len(a) > len(b) else (half, half + odd)
        a, b = a[:keep_a], b[:keep_b]
    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1 + n_pad),
        "attention_mask": [1] * len(input_ids) + [0] * n_pad,
    }


# %% wrong pair: truncates the caller's lists in place (as the original truncate_seq_pair)
# split: dev
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    places = max_length - 3
    a, b = ids_a, ids_b
    if len(a) + len(b) > places:
        shorter = min(len(a), len(b))
        if shorter <= places - shorter:
            keep_a, keep_b = (
                (len(a), places - len(a)) if len(a) == shorter else (places - len(b), len(b))
            )
        else:
            half, odd = divmod(places, 2)
            keep_a, keep_b = (half + odd, half) if len(a) > len(b) else (half, half + odd)
        del a[keep_a:], b[keep_b:]
    input_ids = [cls_id] + a + [sep_id] + b + [sep_id]
    n_pad = max_length - len(input_ids)
    return {
        "input_ids": input_ids + [pad_id] * n_pad,
        "token_type_ids": [0] * (len(a) + 2) + [1] * (len(b) + 1) + [0] * n_pad,
        "attention_mask": [1] * len(input_ids) + [0] * n_pad,
    }


# %% alternative pair: the lengths by the tokenizers loop (shorter kept, halves otherwise), typed by zip
def encode_pair(ids_a, ids_b, max_length, cls_id=101, sep_id=102, pad_id=0):
    places = max_length - 3
    n1, n2 = sorted((len(ids_a), len(ids_b)))
    if n1 + n2 > places:
        n2 = max(n1, places - n1)
        if n1 + n2 > places:
            n1, n2 = places // 2, places // 2 + places % 2
    keep_a, keep_b = (n2, n1) if len(ids_a) > len(ids_b) else (n1, n2)
    segments = [([cls_id, *ids_a[:keep_a], sep_id], 0), ([*ids_b[:keep_b], sep_id], 1)]
    ids = [i for seg, _ in segments for i in seg]
    types = [t for seg, t in segments for _ in seg]
    pad = [0] * (max_length - len(ids))
    return {
        "input_ids": ids + [pad_id] * len(pad),
        "token_type_ids": types + pad,
        "attention_mask": [1] * len(ids) + pad,
    }
