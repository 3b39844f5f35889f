from django.apps import AppConfig


class ConversationsConfig(AppConfig):
    name = "controlplane.conversations"
    label = "conversations"
    verbose_name = "Conversations: channels, messages, approval posts"
