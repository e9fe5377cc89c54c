from django.urls import path

from rolloutlab.accounts import views

app_name = "accounts"
urlpatterns = [
    path("tokens/", views.tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.revoke_token, name="revoke-token"),
    path("teams/", views.teams, name="teams"),
    path("teams/<int:team_id>/members/", views.set_member, name="set-member"),
    path("teams/<int:team_id>/members/<int:membership_id>/remove/", views.remove_member, name="remove-member"),
    path("projects/<int:project_id>/activity/", views.activity, name="activity"),
    path("shares/<int:link_id>/revoke/", views.revoke_share, name="revoke-share"),
]
