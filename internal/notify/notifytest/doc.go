// Package notifytest serves fakes of GitHub's and GitLab's REST APIs and of
// a CloudEvents sink that check each request against the services'
// published shapes (paths, methods, fields, authentication) and keep what
// arrived. Imported by tests only.
package notifytest
