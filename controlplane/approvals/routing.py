# The approval queue's websocket route is added by the web work (issue 6).
websocket_urlpatterns: list = []
