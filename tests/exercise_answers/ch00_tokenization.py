# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch00_tokenization (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.


# %% wrong split: ASCII punctuation only (string.punctuation misses ¿ and —)
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
def split_on_punctuation(word):
    pieces, prev = [], None
    for char in word:
        kind = is_punctuation(char)
        if kind != prev:
            pieces.append("")
        pieces[-1] += char
        prev = kind
    return pieces


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
def basic_tokenize(text):
    text = space_chinese_chars(clean_text(text)).lower()
    return [piece for word in text.split() for piece in split_on_punctuation(word)]


# %% wrong basic: Chinese characters not spaced
def basic_tokenize(text):
    text = clean_text(text)
    text = "".join(
        c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
    ).lower()
    return [piece for word in text.split() for piece in split_on_punctuation(word)]


# %% wrong basic: splits on single spaces (empty words survive)
def basic_tokenize(text):
    text = space_chinese_chars(clean_text(text))
    text = "".join(
        c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn"
    ).lower()
    return [piece for word in text.split(" ") for piece in (split_on_punctuation(word) or [word])]


# %% alternative basic: lowercase first, then strip accents with a comprehension per word
def basic_tokenize(text):
    words = space_chinese_chars(clean_text(text)).lower().split()
    out = []
    for word in words:
        decomposed = unicodedata.normalize("NFD", word)
        out += split_on_punctuation(
            "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
        )
    return out


# %% wrong wordpiece: no ## prefix on continuation pieces
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


# %% wrong wordpiece: keeps the pieces found before the gap, then [UNK]
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
