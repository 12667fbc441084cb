module gitlab.com/gitlab-org/labkit/v2

go 1.24

require github.com/prometheus/client_golang v1.23.2
require golang.org/x/oauth2 v0.36.0
