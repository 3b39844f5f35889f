from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "controlplane.knowledge"
    label = "knowledge"
    verbose_name = "Knowledge: the worker's world store"

    def ready(self) -> None:
        # Lower apps never import this one (docs/architecture.md): knowledge adds its proposal kind's
        # executor, the participant scan's holds, and the proposer of a collected checkout (dispatch
        # collects, and must import no proposals) to the registries those apps offer.
        from controlplane.knowledge.checkout import register_change_sink
        from controlplane.knowledge.proposing import change_propose, knowledge_change
        from controlplane.knowledge.scan import knowledge_change_hits, worker_note_hits
        from controlplane.proposals.executors import register_executor
        from controlplane.proposals.holds import register_hold

        register_executor("knowledge_change", knowledge_change)
        register_hold("knowledge_change", knowledge_change_hits)
        register_hold("memory_note", worker_note_hits)
        register_change_sink(change_propose)
