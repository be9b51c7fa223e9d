"""Django settings of the test site: daphne first (its ``runserver``), then channels."""

SECRET_KEY = "fastdeflate tests only"
DEBUG = False
ALLOWED_HOSTS = ["*"]
INSTALLED_APPS = ["daphne", "channels"]
DATABASES: dict = {}
ROOT_URLCONF = "channels_site.urls"
ASGI_APPLICATION = "channels_site.asgi.application"
USE_TZ = True
