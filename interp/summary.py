"""A run's headline numbers from its metrics log alone (no model is loaded, no torch or pandas)."""

from __future__ import annotations

from interp.formatting import fmt
from interp.names import HELDOUT_PREFIX, HIERARCHY_GAPS, METRICS
from interp.runs import Run
from interp.spec import OPTIMIZER_FIELDS, describe_optimizer, describe_task_variants
from interp.transition import GAP_LEAD_NATS, facts, finite, hierarchy_facts, parse_lead_definition

FINAL = METRICS
FACTS = ("plateau_height", "plateau_start", "plateau_end", "tau_half", "tau_window",
         "window_start", "window_end", "snap_step", "gap_onset", "gap_onset_censored", "gap_lead", "gap_lead_snap")


def run_summary(run: Run) -> dict:
    """Spec, saved steps, plateau height / log K, tau (both kinds) and the final metrics."""
    spec = run.spec
    steps = run.steps
    series = run.metric_series(*FINAL)
    evaluated = series["step"]
    status = run.status or {}
    out: dict = {
        "path": str(run.path),
        "direction": spec.task.direction,
        "k": spec.task.k,
        "n_bases": spec.task.n_bases,
        "dataset_size": spec.task.dataset_size,
        "seed": spec.seed,
        "planned_steps": spec.train.steps,
        "n_checkpoints": len(steps),
        "first_step": steps[0] if steps else None,
        "last_step": steps[-1] if steps else None,
        "last_evaluated": evaluated[-1] if evaluated else None,
        "log_k": run.log_k,
        "state": status.get("state"),
        "wall_seconds": status.get("wall_seconds"),
    }
    out.update(dict.fromkeys(FACTS))
    variants = describe_task_variants(spec.task)
    if variants:
        out["task_variants"] = variants
    if any(name in spec.train.to_dict() for name in OPTIMIZER_FIELDS):  # not the paper's AdamW: say which
        out["optimizer"] = describe_optimizer(spec.train)
    block = run.imported
    if block is not None:  # a run made elsewhere: where from, and how finely its log times anything
        gaps = [b - a for a, b in zip(steps, steps[1:])]
        out["imported"] = {"format": block.get("format"), "path": block.get("path"), "log": block.get("log"),
                           "resolution": max(gaps) if gaps and block.get("log") == "rebuilt" else None,
                           "notes": list(block.get("notes") or []), "not_recorded": list(block.get("not_recorded") or [])}
    if not evaluated:
        return out
    for name in FINAL:
        out[f"final_{name}"] = finite(series[name][-1])
    if not run.log_k > 0:  # K = 1: what there is to time is the full loss's fall (exact match)
        out["exact_99"] = next((st for st, v in zip(evaluated, series["acc_exact"])
                                if finite(v) is not None and v >= 0.99), None)
    if spec.task.holdout_fraction:  # the pairs never trained on, evaluated beside the others
        held = run.metric_series(*(HELDOUT_PREFIX + name for name in FINAL))
        out["heldout"] = {"count": spec.task.held_out_count, "by": spec.task.holdout_by,
                          **{name: finite(held[HELDOUT_PREFIX + name][-1]) for name in FINAL}}
    if spec.task.hierarchy is not None:
        stair = run.metric_series("loss_cand", *HIERARCHY_GAPS)
        out["hierarchy"] = hierarchy_facts(stair["step"], stair["loss_cand"], *(stair[n] for n in HIERARCHY_GAPS),
                                           *spec.task.hierarchy_factors)
    found = facts(run)  # derived once per version of the metrics log
    out.update({key: getattr(found, key) for key in FACTS})
    if run.log_k > 0:  # transitioned, stuck or diverged by the run's rules (interp.outcome)
        from interp.outcome import outcome_of

        judged = outcome_of(run)
        out["outcome"] = {**judged.as_row(), "stopped": judged.stopped}
    return out


Rows = list[tuple[str, str]]


def run_rows(s: dict) -> Rows:
    """A run summary (`run_summary`) as (label, text) rows: the one rendering of `interp show`,
    `interp train`, `interp analyze` and the report."""
    lk = s["log_k"]
    ratio = None if s.get("final_loss_cand") is None or not lk > 0 else s["final_loss_cand"] / lk
    rows = [
        ("run", s["path"]),
        ("task", f"{s['direction']}  K={s['k']}  n_bases={s['n_bases']}  D={s['dataset_size']}  "
                 f"seed={s['seed']}  log K={lk:.4f}" + "".join(f"; {v}" for v in s.get("task_variants") or [])),
        ("saved", f"{s['n_checkpoints']} checkpoints, steps {fmt(s['first_step'])}..{fmt(s['last_step'])} "
                  f"(planned {s['planned_steps']}, last evaluated {fmt(s['last_evaluated'])})"),
        ("plateau", f"Lc / log K = {fmt(s['plateau_height'], '.4f')}; within 5% of log K with dz < 0.05 "
                    f"from step {fmt(s['plateau_start'])} to {fmt(s['plateau_end'])}"),
        ("tau", f"tau_half = {fmt(s['tau_half'])}, tau_window = {fmt(s['tau_window'])} "
                f"(from step {fmt(s['window_start'])} to {fmt(s['window_end'])}); "
                f"snap (Lc < 0.05 log K) at step {fmt(s['snap_step'])}"),
        ("gap lead", f"dz > {GAP_LEAD_NATS:g} nats at or before step {fmt(s.get('gap_onset'))}, the log's first "
                     f"evaluation: the onset is censored (only a bound), so no lead" if s.get("gap_onset_censored") else
                     f"dz > {GAP_LEAD_NATS:g} nats from step {fmt(s.get('gap_onset'), none='never')}: lead "
                     f"(t_loss - t) / t_loss = {fmt(s.get('gap_lead'), '.2f')} with t_loss = tau_half, "
                     f"{fmt(s.get('gap_lead_snap'), '.2f')} with the snap (the author's 50% lead)"),
    ]
    if s.get("optimizer"):
        rows.insert(2, ("optimizer", s["optimizer"]))
    if not lk > 0:  # K = 1, the control: no candidate ambiguity, so nothing of the plateau to report
        at = [label for label, _ in rows].index("plateau")
        rows = [r for r in rows if r[0] not in ("plateau", "tau", "gap lead")]
        rows.insert(at, ("control", f"K = 1: nothing to disambiguate (log K = 0), so no plateau, tau or shuffle gap; "
                                    f"exact match >= 0.99 from step {fmt(s.get('exact_99'), none='never')}"))
    imported = s.get("imported")
    if imported:
        rows.insert(1, ("imported", f"from {imported['path']} ({imported['format']})"
                        + ("; its metrics log was rebuilt from the checkpoints, so tau and every onset are known only "
                           f"to the {imported['resolution']} steps between checkpoints at most; the source's own log "
                           f"is in source_history.jsonl; not recorded: {', '.join(imported['not_recorded'])}"
                           if imported["log"] == "rebuilt" and imported["resolution"] else
                           "; its metrics log is interp's own, carried over" if imported["log"] == "carried" else "")
                        + (f"; {len(imported['notes'])} notes on what is not exact (interp show --json)"
                           if imported["notes"] else "")))
    judged = s.get("outcome")
    if judged:
        rows.append(("outcome", judged["outcome"]
                     + (f" at step {judged['decided_at']}" if judged["decided_at"] is not None else "")
                     + f": {judged['outcome_reason']}" + ("; training stopped there" if judged["stopped"] else "")))
    held = s.get("heldout")
    if held:
        held_ratio = None if held["loss_cand"] is None or not lk > 0 else held["loss_cand"] / lk
        rows.append(("held out", f"{held['count']} {'bases' if held['by'] == 'base' else 'pairs'} never trained on: "
                                 f"Lc / log K = {fmt(held_ratio, '.4f')}, "
                                 f"candidate acc = {fmt(held['acc_cand'], '.3f')}, exact match = "
                                 f"{fmt(held['acc_exact'], '.3f')} (the last evaluation)"))
    stair = s.get("hierarchy")
    if stair:
        span = stair["steps_at_log_k2"]
        rows.append(("hierarchy", f"K1 x K2 = {stair['k1']} x {stair['k2']}: z1 gap > {GAP_LEAD_NATS:g} nats from step "
                                  f"{fmt(stair['z1_onset'], none='never')}, z2 gap from {fmt(stair['z2_onset'], none='never')}; "
                                  f"Lc reached log K2 at {fmt(stair['reached_log_k2'], none='never')} and stayed within 5% of "
                                  f"it for {stair['evaluations_at_log_k2']} evaluations"
                                  + (f" ({span[0]}..{span[1]})" if span else "")
                                  + f"; below 0.05 log K2 at {fmt(stair['solved'], none='never')}"))
    if s.get("final_loss") is not None:
        rows.append(("final", f"Lc / log K = {fmt(ratio, '.4f')}, dz = {fmt(s.get('final_shuffle_gap'), '.3f')} nats, "
                              f"candidate acc = {fmt(s.get('final_acc_cand'), '.3f')}, "
                              f"exact match = {fmt(s.get('final_acc_exact'), '.3f')}"))
    return rows


def lead_under(run: Run, definition: str) -> dict:
    """The shuffle gap's lead under a named definition ("ours", "author" or "T_LOSS/DZ",
    `interp.transition.parse_lead_definition`): {"definition", "t_loss", "dz", "gap_onset", "t_loss_step",
    "gap_lead", "not_measured"}; not_measured is the one-line reason a run's log cannot give it (a run
    trained before the author's columns were logged), and then every value is None."""
    t_loss, dz = parse_lead_definition(definition)
    found = facts(run)
    why = found.not_measured(t_loss, dz)
    lead = {"gap_onset": None, "t_loss": None, "gap_lead": None} if why else found.gap_lead_at(t_loss, dz)
    return {"definition": definition, "t_loss": t_loss, "dz": dz, "gap_onset": lead["gap_onset"],
            "t_loss_step": lead["t_loss"], "gap_lead": lead["gap_lead"], "not_measured": why,
            "censored": bool(lead.get("censored"))}


def lead_row(lead: dict) -> tuple[str, str]:
    """`lead_under`'s result as a (label, text) row of `interp show`."""
    label = f"lead ({lead['definition']})"
    if lead["not_measured"]:
        return label, lead["not_measured"]
    if lead.get("censored"):
        return label, (f"t_loss = {lead['t_loss']} at step {fmt(lead['t_loss_step'], none='never')}, dz ({lead['dz']}) > "
                       f"{GAP_LEAD_NATS:g} nats at or before step {fmt(lead['gap_onset'])} (the log's first evaluation: "
                       f"censored), so no lead")
    return label, (f"t_loss = {lead['t_loss']} at step {fmt(lead['t_loss_step'], none='never')}, dz ({lead['dz']}) > "
                   f"{GAP_LEAD_NATS:g} nats from step {fmt(lead['gap_onset'], none='never')}: (t_loss - t) / t_loss = "
                   f"{fmt(lead['gap_lead'], '.2f')}")


def as_text(rows: Rows) -> str:
    """Rows as aligned text lines, for the terminal."""
    width = max((len(k) for k, _ in rows), default=0)
    return "\n".join(f"{key:<{width}}  {value}" for key, value in rows)
