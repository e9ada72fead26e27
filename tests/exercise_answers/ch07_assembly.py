# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch07_assembly (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong embed: no position embeddings
# split: eval
# names: no position embeddings
def embed(embeddings, input_ids, token_type_ids):
    x = embeddings.word_embeddings(input_ids) + embeddings.token_type_embeddings(token_type_ids)
    return embeddings.dropout(embeddings.layer_norm(x))


# %% wrong embed: LayerNorm before the token types are added
# split: eval
# names: LayerNorm before the token types are added
def embed(embeddings, input_ids, token_type_ids):
    positions = torch.arange(input_ids.shape[1])
    x = embeddings.layer_norm(
        embeddings.word_embeddings(input_ids) + embeddings.position_embeddings(positions)
    )
    return embeddings.dropout(x + embeddings.token_type_embeddings(token_type_ids))


# %% wrong embed: positions counted from 1
# split: eval
# names: positions counted from 1
def embed(embeddings, input_ids, token_type_ids):
    positions = torch.arange(1, input_ids.shape[1] + 1).clamp(
        max=embeddings.position_embeddings.num_embeddings - 1
    )
    x = (
        embeddings.word_embeddings(input_ids)
        + embeddings.position_embeddings(positions)
        + embeddings.token_type_embeddings(token_type_ids)
    )
    return embeddings.dropout(embeddings.layer_norm(x))


# %% wrong layer: pre-LN (LayerNorm before each sublayer)
# split: dev
# names: pre-LN (LayerNorm before each sublayer)
def encoder_layer(layer, hidden_states, bias=None):
    out = layer.attention.output
    context, _ = layer.attention.self_attn(out.layer_norm(hidden_states), bias)
    h = hidden_states + out.dense(context)
    inner = F.gelu(layer.intermediate.dense(layer.output.layer_norm(h)))
    return h + layer.output.dense(inner)


# %% wrong layer: ReLU instead of GELU
# split: eval
# names: ReLU instead of GELU
def encoder_layer(layer, hidden_states, bias=None):
    context, _ = layer.attention.self_attn(hidden_states, bias)
    out = layer.attention.output
    h = out.layer_norm(hidden_states + out.dense(context))
    inner = torch.relu(layer.intermediate.dense(h))
    return layer.output.layer_norm(h + layer.output.dense(inner))


# %% wrong layer: the feed-forward residual adds the layer input instead of h'
# split: eval
# names: the feed-forward residual adds the layer input
def encoder_layer(layer, hidden_states, bias=None):
    context, _ = layer.attention.self_attn(hidden_states, bias)
    out = layer.attention.output
    h = out.layer_norm(hidden_states + out.dense(context))
    inner = F.gelu(layer.intermediate.dense(h))
    return layer.output.layer_norm(hidden_states + layer.output.dense(inner))


# %% wrong layer: calls the layer itself (forbidden)
# split: dev
def encoder_layer(layer, hidden_states, bias=None):
    return layer(hidden_states, bias)[0]


# %% wrong count: forgets the biases
# split: eval
# names: the biases left out
def count_parameters(config):
    H, I = config.hidden_size, config.intermediate_size
    embeddings = (
        config.vocab_size + config.max_position_embeddings + config.type_vocab_size
    ) * H + 2 * H
    layer = 4 * H * H + 2 * H + 2 * H * I + 2 * H
    return embeddings + config.num_hidden_layers * layer + H * H


# %% wrong count: builds the model and counts (forbidden)
# split: dev
def count_parameters(config):
    return sum(p.numel() for p in BertModel(config).parameters())


# %% wrong count: forgets the pooler
# split: dev
# names: the pooler left out
def count_parameters(config):
    H, I = config.hidden_size, config.intermediate_size
    embeddings = (
        config.vocab_size + config.max_position_embeddings + config.type_vocab_size
    ) * H + 2 * H
    layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H
    return embeddings + config.num_hidden_layers * layer


# %% wrong step: never zeroes the gradients (they accumulate)
# split: dev
def pretraining_step(model, batch, optimizer, max_grad_norm=1.0):
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


# %% wrong step: only the MLM loss
# split: eval
def pretraining_step(model, batch, optimizer, max_grad_norm=1.0):
    optimizer.zero_grad()
    loss = model(**batch).mlm_loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


# %% wrong step: clips after the optimizer step (no effect on the update)
# split: dev
def pretraining_step(model, batch, optimizer, max_grad_norm=1.0):
    optimizer.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    return loss.item()


# %% alternative embed: one embedding lookup at a time, positions expanded to (B, L)
def embed(embeddings, input_ids, token_type_ids):
    B, L = input_ids.shape
    positions = torch.arange(L).unsqueeze(0).expand(B, L)
    x = embeddings.word_embeddings.weight[input_ids]
    x = x + embeddings.position_embeddings.weight[positions]
    x = x + embeddings.token_type_embeddings.weight[token_type_ids]
    ln = embeddings.layer_norm
    x = F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, ln.eps)
    return F.dropout(x, p=embeddings.dropout.p, training=embeddings.training)


# %% alternative layer: explicit F.linear, F.layer_norm and the erf form of GELU
def encoder_layer(layer, hidden_states, bias=None):
    def linear(module, x):
        return F.linear(x, module.weight, module.bias)

    def norm(module, x):
        return F.layer_norm(x, module.normalized_shape, module.weight, module.bias, module.eps)

    def dropout(module, x):
        return F.dropout(x, p=module.p, training=layer.training)

    context = layer.attention.self_attn(hidden_states, bias)[0]
    out = layer.attention.output
    h = norm(out.layer_norm, hidden_states + dropout(out.dropout, linear(out.dense, context)))
    z = linear(layer.intermediate.dense, h)
    gelu = 0.5 * z * (1 + torch.erf(z / 2**0.5))
    ffn = dropout(layer.output.dropout, linear(layer.output.dense, gelu))
    return norm(layer.output.layer_norm, h + ffn)


# %% alternative count: sums of module sizes
def count_parameters(config):
    H, I, L = config.hidden_size, config.intermediate_size, config.num_hidden_layers

    def linear(n_in, n_out):
        return n_in * n_out + n_out

    def norm(n):
        return 2 * n

    embeddings = sum(
        n * H for n in (config.vocab_size, config.max_position_embeddings, config.type_vocab_size)
    ) + norm(H)
    per_layer = 4 * linear(H, H) + linear(H, I) + linear(I, H) + 2 * norm(H)
    return int(embeddings + L * per_layer + linear(H, H))


# %% alternative step: set_to_none=False and the losses added by hand
def pretraining_step(model, batch, optimizer, max_grad_norm=1.0):
    model.zero_grad(set_to_none=False)
    output = model(**batch)
    loss = output.mlm_loss + output.nsp_loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(list(model.parameters()), max_norm=max_grad_norm)
    optimizer.step()
    return float(loss.detach())


# %% wrong mlm_head: the tied weight read through .data (no gradient reaches the word embeddings)
# split: eval
def mlm_head(head, hidden_states):
    x = head.transform.layer_norm(F.gelu(head.transform.dense(hidden_states)))
    return x @ head.decoder.weight.data.T + head.bias


# %% wrong mlm_head: the tanh approximation of GELU
# split: eval
# names: the tanh approximation of GELU
def mlm_head(head, hidden_states):
    x = head.transform.layer_norm(F.gelu(head.transform.dense(hidden_states), approximate="tanh"))
    return x @ head.decoder.weight.T + head.bias


# %% wrong mlm_head: no transform, straight to the decoder
# split: dev
# names: the decoder without the transform
def mlm_head(head, hidden_states):
    return hidden_states @ head.decoder.weight.T + head.bias


# %% wrong mlm_head: forgets the decoder's own bias
# split: dev
# names: the decoder without its output bias
def mlm_head(head, hidden_states):
    return head.decoder(head.transform.layer_norm(F.gelu(head.transform.dense(hidden_states))))


# %% wrong mlm_head: F.layer_norm with its default eps instead of the module's
# split: eval
# names: a fixed LayerNorm eps
def mlm_head(head, hidden_states):
    ln = head.transform.layer_norm
    x = F.gelu(head.transform.dense(hidden_states))
    x = F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias)
    return x @ head.decoder.weight.T + head.bias


# %% wrong mlm_head: BERT's eps 1e-12 written in (a model configured with another eps is wrong)
# split: dev
# names: a fixed LayerNorm eps
def mlm_head(head, hidden_states):
    ln = head.transform.layer_norm
    x = F.gelu(head.transform.dense(hidden_states))
    x = F.layer_norm(x, ln.normalized_shape, ln.weight, ln.bias, eps=1e-12)
    return x @ head.decoder.weight.T + head.bias


# %% alternative mlm_head: the transform module, then F.linear with the tied weight
def mlm_head(head, hidden_states):
    x = head.transform.layer_norm(head.transform.act(head.transform.dense(hidden_states)))
    return F.linear(x, head.decoder.weight, head.bias)


# %% wrong nsp: mean pooling instead of the [CLS] vector
# split: eval
# names: the mean of the sequence instead of the [CLS] vector
def nsp_logits(model, sequence_output):
    pooled = torch.tanh(model.bert.pooler.dense(sequence_output.mean(dim=1)))
    return model.cls.seq_relationship(pooled)


# %% wrong nsp: no tanh
# split: dev
# names: the pooler without its tanh
def nsp_logits(model, sequence_output):
    return model.cls.seq_relationship(model.bert.pooler.dense(sequence_output[:, 0]))


# %% wrong nsp: the last token instead of [CLS]
# split: eval
# names: the last token instead of [CLS]
def nsp_logits(model, sequence_output):
    pooled = torch.tanh(model.bert.pooler.dense(sequence_output[:, -1]))
    return model.cls.seq_relationship(pooled)


# %% alternative nsp: the classifier written out with its weight
def nsp_logits(model, sequence_output):
    dense, cls = model.bert.pooler.dense, model.cls.seq_relationship
    pooled = (sequence_output[:, 0] @ dense.weight.T + dense.bias).tanh()
    return pooled @ cls.weight.T + cls.bias


# %% wrong forward: the padding mask ignored
# split: eval
# names: the padding mask left out
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    h = embed(model.bert.embeddings, input_ids, token_type_ids)
    for layer in model.bert.encoder.layer:
        h = encoder_layer(layer, h, None)
    prediction_logits = mlm_head(model.cls.predictions, h)
    seq_logits = nsp_logits(model, h)
    V = prediction_logits.shape[-1]
    loss = F.cross_entropy(prediction_logits.reshape(-1, V), labels.reshape(-1)) + F.cross_entropy(
        seq_logits, next_sentence_label
    )
    return prediction_logits, seq_logits, loss


# %% wrong forward: the MLM loss from detached logits (only the NSP loss trains the model)
# split: dev
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    h = embed(model.bert.embeddings, input_ids, token_type_ids)
    bias = extended_attention_mask(attention_mask, h.dtype)
    for layer in model.bert.encoder.layer:
        h = encoder_layer(layer, h, bias)
    prediction_logits = mlm_head(model.cls.predictions, h)
    seq_logits = nsp_logits(model, h)
    V = prediction_logits.shape[-1]
    scores = prediction_logits.detach().reshape(-1, V)  # "only for the loss's value"
    loss = F.cross_entropy(scores, labels.reshape(-1)) + F.cross_entropy(
        seq_logits, next_sentence_label
    )
    return prediction_logits, seq_logits, loss


# %% wrong forward: the mask's polarity inverted (attends to the padding only)
# split: eval
# names: an inverted padding mask
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    h = embed(model.bert.embeddings, input_ids, token_type_ids)
    bias = extended_attention_mask(1 - attention_mask, h.dtype)
    for layer in model.bert.encoder.layer:
        h = encoder_layer(layer, h, bias)
    prediction_logits = mlm_head(model.cls.predictions, h)
    seq_logits = nsp_logits(model, h)
    V = prediction_logits.shape[-1]
    loss = F.cross_entropy(prediction_logits.reshape(-1, V), labels.reshape(-1)) + F.cross_entropy(
        seq_logits, next_sentence_label
    )
    return prediction_logits, seq_logits, loss


# %% wrong forward: the MLM loss averaged over every position (ignored ones as 0)
# split: eval
# names: the MLM loss averaged over every position
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    h = embed(model.bert.embeddings, input_ids, token_type_ids)
    bias = extended_attention_mask(attention_mask, h.dtype)
    for layer in model.bert.encoder.layer:
        h = encoder_layer(layer, h, bias)
    prediction_logits = mlm_head(model.cls.predictions, h)
    seq_logits = nsp_logits(model, h)
    V = prediction_logits.shape[-1]
    mlm = (
        F.cross_entropy(prediction_logits.reshape(-1, V), labels.reshape(-1), reduction="sum")
        / labels.numel()
    )
    return prediction_logits, seq_logits, mlm + F.cross_entropy(seq_logits, next_sentence_label)


# %% wrong forward: only the first layer
# split: dev
# names: only the first encoder layer
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    h = embed(model.bert.embeddings, input_ids, token_type_ids)
    h = encoder_layer(
        model.bert.encoder.layer[0], h, extended_attention_mask(attention_mask, h.dtype)
    )
    prediction_logits = mlm_head(model.cls.predictions, h)
    seq_logits = nsp_logits(model, h)
    V = prediction_logits.shape[-1]
    loss = F.cross_entropy(prediction_logits.reshape(-1, V), labels.reshape(-1)) + F.cross_entropy(
        seq_logits, next_sentence_label
    )
    return prediction_logits, seq_logits, loss


# %% wrong forward: the encoder loop over layer[:-1] (stops one layer early)
# split: eval
# names: the encoder loop stops one layer early
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    h = embed(model.bert.embeddings, input_ids, token_type_ids)
    bias = extended_attention_mask(attention_mask, h.dtype)
    for layer in model.bert.encoder.layer[:-1]:
        h = encoder_layer(layer, h, bias)
    prediction_logits = mlm_head(model.cls.predictions, h)
    seq_logits = nsp_logits(model, h)
    V = prediction_logits.shape[-1]
    loss = F.cross_entropy(prediction_logits.reshape(-1, V), labels.reshape(-1))
    return prediction_logits, seq_logits, loss + F.cross_entropy(seq_logits, next_sentence_label)


# %% alternative forward: the mask as a boolean where(), the loss gathered at the labelled positions
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    h = embed(model.bert.embeddings, input_ids, token_type_ids)
    bias = torch.where(attention_mask[:, None, None, :].bool(), 0.0, torch.finfo(h.dtype).min).to(
        h.dtype
    )
    for layer in model.bert.encoder.layer:
        h = encoder_layer(layer, h, bias)
    prediction_logits = mlm_head(model.cls.predictions, h)
    seq_logits = nsp_logits(model, h)
    keep = labels != IGNORE_INDEX
    mlm = F.cross_entropy(prediction_logits[keep], labels[keep])
    return prediction_logits, seq_logits, mlm + F.cross_entropy(seq_logits, next_sentence_label)


# %% wrong embed: no dropout (right in evaluation, wrong in training)
# split: eval
def embed(embeddings, input_ids, token_type_ids):
    positions = torch.arange(input_ids.shape[1])
    x = (
        embeddings.word_embeddings(input_ids)
        + embeddings.position_embeddings(positions)
        + embeddings.token_type_embeddings(token_type_ids)
    )
    return embeddings.layer_norm(x)


# %% wrong layer: no dropout (right in evaluation, wrong in training)
# split: eval
def encoder_layer(layer, hidden_states, bias=None):
    context, _ = layer.attention.self_attn(hidden_states, bias)
    out = layer.attention.output
    h = out.layer_norm(hidden_states + out.dense(context))
    inner = F.gelu(layer.intermediate.dense(h))
    return layer.output.layer_norm(h + layer.output.dense(inner))


# %% wrong count: BERT-base's 512 positions and 2 token types written in (the book's numbers)
# split: eval
# names: BERT-base's 512 positions and 2 types written in
def count_parameters(config):
    H, I = config.hidden_size, config.intermediate_size
    embeddings = (config.vocab_size + 512 + 2) * H + 2 * H
    layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H
    return embeddings + config.num_hidden_layers * layer + H * H + H


# %% wrong mlm_head: the decoder product under torch.no_grad() (the tied weight gets no gradient)
# split: dev
def mlm_head(head, hidden_states):
    x = head.transform.layer_norm(F.gelu(head.transform.dense(hidden_states)))
    with torch.no_grad():
        scores = x @ head.decoder.weight.T
    return scores + head.bias


# %% wrong step: switches the model to eval mode (dropout off for the rest of training)
# split: eval
def pretraining_step(model, batch, optimizer, max_grad_norm=1.0):
    model.eval()
    optimizer.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return loss.item()


# %% wrong forward: runs under torch.no_grad() (no graph: the loss cannot be back-propagated)
# split: eval
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    with torch.no_grad():
        h = embed(model.bert.embeddings, input_ids, token_type_ids)
        bias = extended_attention_mask(attention_mask, h.dtype)
        for layer in model.bert.encoder.layer:
            h = encoder_layer(layer, h, bias)
        prediction_logits = mlm_head(model.cls.predictions, h)
        seq_logits = nsp_logits(model, h)
    V = prediction_logits.shape[-1]
    loss = F.cross_entropy(prediction_logits.reshape(-1, V), labels.reshape(-1)) + F.cross_entropy(
        seq_logits, next_sentence_label
    )
    return prediction_logits, seq_logits, loss


# %% wrong forward: switches the model to eval mode (the caller's training goes on without dropout)
# split: dev
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    model.eval()
    h = embed(model.bert.embeddings, input_ids, token_type_ids)
    bias = extended_attention_mask(attention_mask, h.dtype)
    for layer in model.bert.encoder.layer:
        h = encoder_layer(layer, h, bias)
    prediction_logits = mlm_head(model.cls.predictions, h)
    seq_logits = nsp_logits(model, h)
    V = prediction_logits.shape[-1]
    loss = F.cross_entropy(prediction_logits.reshape(-1, V), labels.reshape(-1)) + F.cross_entropy(
        seq_logits, next_sentence_label
    )
    return prediction_logits, seq_logits, loss


# %% alternative mlm_head: the tied weight through F.linear after the transform module's parts
def mlm_head(head, hidden_states):
    t = head.transform
    x = F.layer_norm(
        F.gelu(t.dense(hidden_states)),
        t.layer_norm.normalized_shape,
        t.layer_norm.weight,
        t.layer_norm.bias,
        t.layer_norm.eps,
    )
    return F.linear(x, head.decoder.weight) + head.bias


# %% wrong forward: model.train() first (a model being evaluated would get its dropout back)
# split: dev
def pretraining_forward(
    model, input_ids, token_type_ids, attention_mask, labels, next_sentence_label
):
    model.train()
    h = embed(model.bert.embeddings, input_ids, token_type_ids)
    bias = extended_attention_mask(attention_mask, h.dtype)
    for layer in model.bert.encoder.layer:
        h = encoder_layer(layer, h, bias)
    prediction_logits = mlm_head(model.cls.predictions, h)
    seq_logits = nsp_logits(model, h)
    V = prediction_logits.shape[-1]
    loss = F.cross_entropy(prediction_logits.reshape(-1, V), labels.reshape(-1)) + F.cross_entropy(
        seq_logits, next_sentence_label
    )
    return prediction_logits, seq_logits, loss


# %% wrong layer: no residual around the attention sublayer (LayerNorm of the attention output alone)
# split: eval
# names: no residual around the attention sublayer
def encoder_layer(layer, hidden_states, bias=None):
    context, _ = layer.attention.self_attn(hidden_states, bias)
    out = layer.attention.output
    h = out.layer_norm(out.dense(context))
    inner = F.gelu(layer.intermediate.dense(h))
    return layer.output.layer_norm(h + layer.output.dense(inner))


# %% wrong layer: the first residual forgotten: h = norm(dense(context)), dropout kept
# split: dev
# names: no residual around the attention sublayer
def encoder_layer(layer, hidden_states, bias=None):
    attn = layer.attention
    context = attn.self_attn(hidden_states, bias)[0]
    h = attn.output.layer_norm(attn.output.dropout(attn.output.dense(context)))
    ffn = layer.output.dense(F.gelu(layer.intermediate.dense(h)))
    return layer.output.layer_norm(layer.output.dropout(ffn) + h)


# %% wrong layer: both residuals left out (a plain stack of sublayers)
# split: dev
# names: no residual connections at all
def encoder_layer(layer, hidden_states, bias=None):
    context, _ = layer.attention.self_attn(hidden_states, bias)
    h = layer.attention.output.layer_norm(layer.attention.output.dense(context))
    inner = F.gelu(layer.intermediate.dense(h))
    return layer.output.layer_norm(layer.output.dense(inner))


# %% wrong embed: the token type embeddings left out (words and positions only)
# split: eval
# names: no token type (segment) embeddings
def embed(embeddings, input_ids, token_type_ids):
    positions = torch.arange(input_ids.shape[1])
    x = embeddings.word_embeddings(input_ids) + embeddings.position_embeddings(positions)
    return embeddings.dropout(embeddings.layer_norm(x))


# %% wrong embed: segment embeddings forgotten, position ids expanded to the batch
# split: eval
# names: no token type (segment) embeddings
def embed(embeddings, input_ids, token_type_ids):
    B, L = input_ids.shape
    position_ids = torch.arange(L, device=input_ids.device).unsqueeze(0).expand(B, L)
    x = embeddings.word_embeddings(input_ids)
    x = x + embeddings.position_embeddings(position_ids)
    x = embeddings.layer_norm(x)
    return embeddings.dropout(x)


# %% wrong embed: word and position embeddings summed, token_type_ids unused
# split: eval
# names: no token type (segment) embeddings
def embed(embeddings, input_ids, token_type_ids):
    L = input_ids.size(1)
    words = embeddings.word_embeddings(input_ids)
    pos = embeddings.position_embeddings(torch.arange(L))[None]
    return embeddings.dropout(embeddings.layer_norm(words + pos))


# %% wrong embed: token_type_ids ignored: the sum of the word and position tables only
# split: dev
# names: no token type (segment) embeddings
def embed(embeddings, input_ids, token_type_ids):
    seq_len = input_ids.size(-1)
    pos_ids = torch.arange(seq_len, dtype=torch.long)
    h = embeddings.word_embeddings(input_ids) + embeddings.position_embeddings(pos_ids)
    h = embeddings.layer_norm(h)
    return embeddings.dropout(h)


# %% wrong embed: a single-sentence view of BERT: no segment embedding added
# split: dev
# names: no token type (segment) embeddings
def embed(embeddings, input_ids, token_type_ids):
    words = embeddings.word_embeddings(input_ids)
    positions = embeddings.position_embeddings.weight[: input_ids.shape[1]]
    return embeddings.dropout(embeddings.layer_norm(words + positions))


# %% wrong mlm_head: the transform's LayerNorm left out (dense and GELU only)
# split: dev
# names: the transform without its LayerNorm
def mlm_head(head, hidden_states):
    x = F.gelu(head.transform.dense(hidden_states))
    return x @ head.decoder.weight.T + head.bias


# %% wrong mlm_head: dense, GELU, then straight to the decoder: no layer_norm
# split: dev
# names: the transform without its LayerNorm
def mlm_head(head, hidden_states):
    t = head.transform
    h = F.gelu(t.dense(hidden_states), approximate="none")
    return torch.matmul(h, head.decoder.weight.transpose(0, 1)) + head.bias


# %% wrong mlm_head: forgets the normalisation between the GELU and the decoder
# split: eval
# names: the transform without its LayerNorm
def mlm_head(head, hidden_states):
    hidden = head.transform.dense(hidden_states)
    hidden = F.gelu(hidden)
    logits = F.linear(hidden, head.decoder.weight, head.bias)
    return logits


# %% wrong nsp: tanh of the [CLS] vector without the pooler's dense layer
# split: dev
# names: the pooler's dense layer skipped
def nsp_logits(model, sequence_output):
    return model.cls.seq_relationship(torch.tanh(sequence_output[:, 0]))


# %% wrong nsp: the [CLS] vector straight into the classifier (no pooler at all)
# split: dev
# names: no pooler: h_[CLS] straight into the classifier
def nsp_logits(model, sequence_output):
    cls = sequence_output[:, 0, :]
    return model.cls.seq_relationship(cls)


# %% wrong nsp: pooler dense skipped: tanh(h_cls) fed to seq_relationship
# split: dev
# names: the pooler's dense layer skipped
def nsp_logits(model, sequence_output):
    h_cls = sequence_output[:, 0]
    pooled = h_cls.tanh()
    return pooled @ model.cls.seq_relationship.weight.T + model.cls.seq_relationship.bias
