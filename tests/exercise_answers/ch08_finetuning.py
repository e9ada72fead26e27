# ruff: noqa
# Wrong and alternative answers for the cells of solutions/ch08_finetuning (tests/test_exercises.py).
# "# %% wrong <grade id>: <what>" replaces that solution cell and must lose exactly its points;
# "# %% alternative <grade id>: <what>" is correct but written differently: full marks.
# Every block is graded in process; the first two wrong answers of a part also go through nbgrader.


# %% wrong head: regression compares (B, 1) logits with (B,) labels (broadcasts to (B, B))
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits, labels.to(logits.dtype))
    return logits, F.cross_entropy(logits, labels)


# %% wrong head: softmax before the cross-entropy (a second softmax inside it)
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits[:, 0], labels.to(logits.dtype))
    return logits, F.cross_entropy(torch.softmax(logits, -1), labels)


# %% wrong head: forgets the bias
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T
    if logits.shape[1] == 1:
        return logits, F.mse_loss(logits[:, 0], labels.to(logits.dtype))
    return logits, F.cross_entropy(logits, labels)


# %% wrong head: cross-entropy for one output too (always 0: nothing to learn)
def classifier_head(pooled, weight, bias, labels):
    logits = pooled @ weight.T + bias
    return logits, F.cross_entropy(logits, labels.long().clamp(0, logits.shape[1] - 1))


# %% wrong head: calls the model's own loss (forbidden)
def classifier_head(pooled, weight, bias, labels):
    from bertcourse.model import sequence_classification_loss

    logits = pooled @ weight.T + bias
    kind = "regression" if logits.shape[1] == 1 else "single_label_classification"
    return logits, sequence_classification_loss(logits, labels, kind)


# %% alternative head: log-softmax and a gather; the squared error written out
def classifier_head(pooled, weight, bias, labels):
    logits = torch.einsum("bh,ch->bc", pooled, weight) + bias
    if weight.shape[0] == 1:
        return logits, ((logits.squeeze(1) - labels.float()) ** 2).mean()
    log_probs = logits - logits.logsumexp(-1, keepdim=True)
    return logits, -log_probs.gather(1, labels[:, None]).mean()


# %% wrong step: never zeroes the gradients (stale ones are added)
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


# %% wrong eval: dropout left on (no model.eval())
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
