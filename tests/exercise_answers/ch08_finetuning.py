# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch08_finetuning (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.
# "# split: dev|eval" (tests/answer_split.py): entries of the mistake catalogues are written
# from the dev half; named/right/wrong is measured on the eval half (scripts/named_mistakes.py).


# %% wrong head: regression compares (B, 1) logits with (B,) labels (broadcasts to (B, B))
# split: eval
# names: (B, 1) logits against (B,) labels
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits, labels.to(logits.dtype))
    return logits, F.cross_entropy(logits, labels)


# %% wrong head: softmax before the cross-entropy (a second softmax inside it)
# split: dev
# names: a softmax before the cross-entropy
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits[:, 0], labels.to(logits.dtype))
    return logits, F.cross_entropy(torch.softmax(logits, -1), labels)


# %% wrong head: forgets the bias
# split: eval
# names: the bias left out
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits[:, 0], labels.to(logits.dtype))
    return logits, F.cross_entropy(logits, labels)


# %% wrong head: cross-entropy for one output too (always 0: nothing to learn)
# split: dev
# names: a cross-entropy for a single output
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    return logits, F.cross_entropy(logits, labels.long().clamp(0, logits.shape[1] - 1))


# %% wrong head: calls the model's own loss (forbidden)
# split: eval
def classifier_head(pooled, weight, bias, labels):
    from bertcourse.model import sequence_classification_loss

    logits = pooled @ weight.T + bias
    kind = "regression" if logits.shape[1] == 1 else "single_label_classification"
    return logits, sequence_classification_loss(logits, labels, kind)


# %% wrong head: log of the softmax in two steps (-inf for a confident mistake)
# split: eval
# names: the log of the softmax, computed in two steps
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits[:, 0], labels.to(logits.dtype))
    probs = torch.softmax(logits, -1)
    return logits, -torch.log(probs[torch.arange(len(labels)), labels]).mean()


# %% wrong head: the sum over the batch, not the mean
# split: dev
# names: the sum of the losses instead of their mean
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    if logits.shape[1] == 1:
        return logits, ((logits[:, 0] - labels.to(logits.dtype)) ** 2).sum()
    return logits, F.cross_entropy(logits, labels, reduction="sum")


# %% wrong head: float32 everywhere (.float() on the inputs), whatever the dtype of pooled
# split: dev
# names: float32 results for float64 inputs
def classifier_head(pooled, weight, bias, labels):
    logits = pooled.float() @ weight.float().T + bias.float()
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits[:, 0], labels.float())
    return logits, F.cross_entropy(logits, labels)


# %% wrong head: regression labels cast to the class-id dtype (long), so 0.7 becomes 0
# split: eval
# names: regression labels rounded to integers
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits[:, 0], labels.long().to(logits.dtype))
    return logits, F.cross_entropy(logits, labels)


# %% wrong head: normalises the pooled vectors in place (modifies the input)
# split: eval
def classifier_head(pooled, weight, bias, labels):
    pooled /= pooled.norm(dim=-1, keepdim=True).clamp(
        min=1.0
    )  # a no-op for tanh outputs < 1? not always
    logits = pooled @ weight.T + bias
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits[:, 0], labels.to(logits.dtype))
    return logits, F.cross_entropy(logits, labels)


# %% alternative head: nn.functional.linear, log_softmax and nll_loss; the squared error in the labels' view
def classifier_head(pooled, weight, bias, labels):
    logits = F.linear(pooled, weight, bias)
    if logits.shape[-1] == 1:
        return logits, F.mse_loss(logits, labels.view(-1, 1).to(logits.dtype))
    return logits, F.nll_loss(F.log_softmax(logits, dim=-1), labels)


# %% alternative head: log-softmax and a gather; the squared error written out
def classifier_head(pooled, weight, bias, labels):
    logits = torch.einsum("bh,ch->bc", pooled, weight) + bias
    if weight.shape[0] == 1:
        return logits, ((logits.squeeze(1) - labels.float()) ** 2).mean()
    log_probs = logits - logits.logsumexp(-1, keepdim=True)
    return logits, -log_probs.gather(1, labels[:, None]).mean()


# %% wrong step: never zeroes the gradients (stale ones are added)
# split: eval
# names: stale gradients added
def fine_tuning_step(model, batch, lr, max_grad_norm=1.0):
    model.train()
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    return loss.item()


# %% wrong step: no gradient clipping
# split: eval
# names: the update with the unclipped gradient
def fine_tuning_step(model, batch, lr, max_grad_norm=1.0):
    model.train()
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    return loss.item()


# %% wrong step: returns the loss after the update
# split: dev
# names: the loss after the update
def fine_tuning_step(model, batch, lr, max_grad_norm=1.0):
    model.train()
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
        return model(**batch).loss.item()


# %% wrong step: clips each parameter's gradient on its own (clip_grad_value_-like), not the global norm
# split: eval
# names: each parameter's gradient clipped on its own
def fine_tuning_step(model, batch, lr, max_grad_norm=1.0):
    model.train()
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    for p in model.parameters():
        torch.nn.utils.clip_grad_norm_([p], max_grad_norm)
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    return loss.item()


# %% wrong step: never sets training mode (a model that arrives in eval mode keeps dropout off)
# split: dev
# names: no model.train() first
def fine_tuning_step(model, batch, lr, max_grad_norm=1.0):
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    return loss.item()


# %% wrong step: zero_grad after backward (the gradients are gone before the update)
# split: eval
# names: zero_grad between backward and the update
def fine_tuning_step(model, batch, lr, max_grad_norm=1.0):
    model.train()
    loss = model(**batch).loss
    loss.backward()
    model.zero_grad(set_to_none=False)
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    return loss.item()


# %% wrong step: clips after the update (the step used the unclipped gradient)
# split: dev
# names: the update with the unclipped gradient
def fine_tuning_step(model, batch, lr, max_grad_norm=1.0):
    model.train()
    model.zero_grad()
    loss = model(**batch).loss
    loss.backward()
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    return loss.item()


# %% alternative step: torch.optim.SGD made inside the step (no state to keep: plain SGD)
def fine_tuning_step(model, batch, lr, max_grad_norm=1.0):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    model.train()
    optimizer.zero_grad()
    out = model(
        batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], batch["labels"]
    )
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    optimizer.step()
    return float(out.loss.detach())


# %% wrong eval: no torch.no_grad(), the logits detached at the end (a graph is still recorded)
# split: dev
def evaluate(model, batches):
    was_training = model.training
    model.eval()
    logits, labels = [], []
    for batch in batches:
        out = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
        logits.append(out.logits.detach())
        labels.append(batch["labels"])
    model.train(was_training)
    logits, labels = torch.cat(logits), torch.cat(labels)
    return {
        "logits": logits,
        "loss": F.cross_entropy(logits, labels).item(),
        "accuracy": (logits.argmax(-1) == labels).float().mean().item(),
    }


# %% wrong eval: dropout left on (no model.eval())
# split: dev
def evaluate(model, batches):
    logits, labels = [], []
    with torch.no_grad():
        for batch in batches:
            logits.append(
                model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).logits
            )
            labels.append(batch["labels"])
    logits, labels = torch.cat(logits), torch.cat(labels)
    return {
        "logits": logits,
        "loss": F.cross_entropy(logits, labels).item(),
        "accuracy": (logits.argmax(-1) == labels).float().mean().item(),
    }


# %% wrong eval: no torch.no_grad() (a graph is recorded for every batch)
# split: dev
def evaluate(model, batches):
    was_training = model.training
    model.eval()
    logits, labels = [], []
    for batch in batches:
        logits.append(
            model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).logits
        )
        labels.append(batch["labels"])
    model.train(was_training)
    logits, labels = torch.cat(logits), torch.cat(labels)
    return {
        "logits": logits,
        "loss": F.cross_entropy(logits, labels).item(),
        "accuracy": (logits.argmax(-1) == labels).float().mean().item(),
    }


# %% wrong eval: the mean of the batch means (batches of different sizes)
# split: eval
# names: the loss as the mean of the batch means
def evaluate(model, batches):
    was_training = model.training
    model.eval()
    logits, labels, losses = [], [], []
    with torch.no_grad():
        for batch in batches:
            out = model(**batch)
            logits.append(out.logits)
            labels.append(batch["labels"])
            losses.append(out.loss.item())
    model.train(was_training)
    logits, labels = torch.cat(logits), torch.cat(labels)
    return {
        "logits": logits,
        "loss": sum(losses) / len(losses),
        "accuracy": (logits.argmax(-1) == labels).float().mean().item(),
    }


# %% wrong eval: never restores training mode (the caller's training loop goes on without dropout)
# split: eval
def evaluate(model, batches):
    model.eval()
    logits, labels = [], []
    with torch.no_grad():
        for batch in batches:
            logits.append(
                model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).logits
            )
            labels.append(batch["labels"])
    logits, labels = torch.cat(logits), torch.cat(labels)
    return {
        "logits": logits,
        "loss": F.cross_entropy(logits, labels).item(),
        "accuracy": (logits.argmax(-1) == labels).float().mean().item(),
    }


# %% wrong eval: model.train() at the end, even for a model that came in eval mode
# split: dev
def evaluate(model, batches):
    model.eval()
    logits, labels = [], []
    with torch.no_grad():
        for batch in batches:
            logits.append(
                model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).logits
            )
            labels.append(batch["labels"])
    model.train()
    logits, labels = torch.cat(logits), torch.cat(labels)
    return {
        "logits": logits,
        "loss": F.cross_entropy(logits, labels).item(),
        "accuracy": (logits.argmax(-1) == labels).float().mean().item(),
    }


# %% wrong eval: the accuracy's mean over batches (batches of different sizes)
# split: eval
# names: the accuracy as the mean of the batch accuracies
def evaluate(model, batches):
    was_training = model.training
    model.eval()
    logits, labels, accs = [], [], []
    with torch.no_grad():
        for batch in batches:
            z = model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).logits
            logits.append(z)
            labels.append(batch["labels"])
            accs.append((z.argmax(-1) == batch["labels"]).float().mean().item())
    model.train(was_training)
    logits, labels = torch.cat(logits), torch.cat(labels)
    return {
        "logits": logits,
        "loss": F.cross_entropy(logits, labels).item(),
        "accuracy": sum(accs) / len(accs),
    }


# %% alternative eval: torch.inference_mode, per-batch sums with the model's own loss
def evaluate(model, batches):
    was_training = model.training
    model.eval()
    total, correct, count, logits = 0.0, 0, 0, []
    with torch.inference_mode():
        for batch in batches:
            out = model(**batch)
            n = batch["labels"].shape[0]
            total += out.loss.item() * n
            correct += int((out.logits.argmax(-1) == batch["labels"]).sum())
            count += n
            logits.append(out.logits.clone())
    model.train(was_training)
    return {"logits": torch.cat(logits), "loss": total / count, "accuracy": correct / count}


# %% wrong eval: torch.set_grad_enabled(False) left on (training after it would learn nothing)
# split: dev
def evaluate(model, batches):
    was_training = model.training
    model.eval()
    torch.set_grad_enabled(False)
    logits, labels = [], []
    for batch in batches:
        logits.append(
            model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).logits
        )
        labels.append(batch["labels"])
    model.train(was_training)
    logits, labels = torch.cat(logits), torch.cat(labels)
    return {
        "logits": logits,
        "loss": F.cross_entropy(logits, labels).item(),
        "accuracy": (logits.argmax(-1) == labels).float().mean().item(),
    }


# %% alternative eval: the no_grad decorator on an inner function, sums over examples
def evaluate(model, batches):
    @torch.no_grad()
    def scores(batch):
        return model(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).logits

    was_training = model.training
    model.eval()
    try:
        logits = torch.cat([scores(batch) for batch in batches])
    finally:
        model.train(was_training)
    labels = torch.cat([batch["labels"] for batch in batches])
    total = F.cross_entropy(logits, labels, reduction="sum").item()
    right = int((logits.argmax(-1) == labels).sum())
    return {"logits": logits, "loss": total / len(labels), "accuracy": right / len(labels)}


# %% wrong head: regression labels not cast (float64 labels make a float32 model's loss float64)
# split: eval
# names: regression labels not cast to the logits' dtype
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits.squeeze(-1), labels)
    return logits, F.cross_entropy(logits, labels)
