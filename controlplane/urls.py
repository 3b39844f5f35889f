from django.contrib import admin
from django.urls import include, path

from controlplane.api import api

handler403 = "controlplane.web.errors.permission_denied"

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", api.urls),
    path("", include("controlplane.web.urls")),
]
