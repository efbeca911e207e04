"""The run report's figures of what the residual stream knows and what each part writes (probes, erasure, direct
logit attribution, the unembedding's geometry): each registers its analysis's section (`interp.report.sections`) and
returns a plotly figure, or raises InterpError (NotComputed for one that runs only when asked) saying why not."""

from __future__ import annotations

from interp.report.sections import section


@section("probes", "probes", "What the residual stream knows: linear probes for z",
         "Held-out accuracy of a multinomial logistic probe for z at the decision position after the embeddings and each "
         "layer (80% of the probe's bases to fit, 20% to score; chance 1/K), each checkpoint; x marks the decodable cells "
         "(accuracy at least 0.9 of the way from chance, selectivity against the control task at least 0.5). Below: the "
         "selectivity over steps, with the events of the timeline.")
def probes(c):
    from interp.plots.decoding import probe_heatmap

    return probe_heatmap(c.need("probes"), tau=c.tau, onsets=c.event_steps())


@section("erasure", "erasure", "Concept erasure: how much of the use of z is linearly decodable",
         "LEACE fitted on the training bases erases every linear trace of z at one site; the erased stream patched in, "
         "the first-token candidate loss against the clean one (log K dashed), and the share of the model's use of z "
         "this removes (undefined on the plateau, where z is not used).")
def erasure(c):
    from interp.plots.decoding import erasure_curves

    return erasure_curves(c.need("erasure"), c.run.log_k, tau=c.tau, onsets=c.event_steps())


@section("attribution", "attribution", "Direct logit attribution",
         "Each head's, MLP's and the embeddings' direct contribution to the logit difference between the correct "
         "candidate's first character and the mean of the others', through the final LayerNorm at its clean scale, "
         "averaged over every example; the model's own difference dashed, the routing head thick.")
def attribution(c):
    from interp.plots.decoding import attribution_curves

    return attribution_curves(c.need("attribution", "attribution"), tau=c.tau, onsets=c.event_steps(),
                              highlight=c.findings.get("routing_head"))


@section("unembed_geometry", "unembed_geometry", "The unembedding's geometry over the candidates",
         "Per base, the cosines among its candidates' first-character unembedding columns, the alignment of each with "
         "its own selector's embedding, and W_U's effective rank, across checkpoints (weights only).")
def unembed_geometry(c):
    from interp.plots.decoding import unembed_curves

    return unembed_curves(c.need("unembed_geometry"), tau=c.tau, onsets=c.event_steps())
