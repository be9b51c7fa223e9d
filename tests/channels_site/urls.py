"""No Django views: the test site is all consumers (channels_site.asgi)."""

urlpatterns: list = []
