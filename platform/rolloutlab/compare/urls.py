from django.urls import path

from rolloutlab.compare import views

app_name = "compare"
urlpatterns = [
    path("", views.compare_page, name="page"),
    path("experiments/", views.index, name="index"),
    path("sweep/", views.sweep, name="sweep"),
    path("share/", views.share, name="share"),
    path("experiments/<int:experiment_id>/", views.experiment, name="experiment"),
]
