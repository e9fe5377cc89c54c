from django.urls import path

from rolloutlab.alerts import views

app_name = "alerts"
urlpatterns = [
    path("<int:project_id>/", views.project_page, name="project"),
    path("<int:project_id>/alerts/<int:rule_id>/mute/", views.mute, name="mute"),
    path("<int:project_id>/alerts/<int:rule_id>/delete/", views.delete, name="delete"),
]
