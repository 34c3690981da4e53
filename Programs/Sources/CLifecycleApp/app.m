#import <Foundation/Foundation.h>

#include <stdio.h>

#include "CLifecycleApp.h"

// The lifecycle protocol: the GNU runtime records only its required method.
@protocol LAApplicationDelegate
- (void)applicationDidFinishLaunching:(id)application;
@optional
- (void)applicationDidBecomeActive:(id)application;
- (BOOL)application:(id)application openURL:(const char *)url;
- (void)applicationWillTerminate:(id)application;
@end

@interface LAApplication : NSObject {
    id delegate;
}
- (void)setDelegate:(id)newDelegate;
- (void)run;
@end

@implementation LAApplication
- (void)setDelegate:(id)newDelegate { delegate = newDelegate; }
- (void)run {
    [delegate applicationDidFinishLaunching:self];
    [delegate applicationDidBecomeActive:self];
    BOOL opened = [delegate application:self openURL:"app://inbox/42"];
    printf("  application: the delegate %s the URL\n", opened ? "opened" : "did not open");
    [delegate applicationWillTerminate:self];
}
@end

@interface LAAppDelegate : NSObject <LAApplicationDelegate>
@end

@implementation LAAppDelegate
- (void)applicationDidFinishLaunching:(id)application { printf("  delegate: did finish launching\n"); }
- (void)applicationDidBecomeActive:(id)application { printf("  delegate: did become active\n"); }
- (BOOL)application:(id)application openURL:(const char *)url {
    printf("  delegate: open %s\n", url);
    return YES;
}
- (void)applicationWillTerminate:(id)application { printf("  delegate: will terminate\n"); }
@end

@interface LAAnalytics : NSObject
@end

@implementation LAAnalytics
- (void)applicationDidFinishLaunching:(id)application { printf("  analytics: session starts\n"); }
- (void)applicationDidBecomeActive:(id)application { printf("  analytics: foreground\n"); }
- (BOOL)application:(id)application openURL:(const char *)url {
    printf("  analytics: opened from %s\n", url);
    return NO;
}
- (void)applicationWillTerminate:(id)application { printf("  analytics: session ends\n"); }
@end

@interface LAPush : NSObject
@end

@implementation LAPush
- (void)applicationDidFinishLaunching:(id)application { printf("  push: registers for notifications\n"); }
- (void)applicationWillTerminate:(id)application { printf("  push: flushes its queue\n"); }
@end

void *la_application_new(void) { return [LAApplication new]; }
void *la_delegate_new(void) { return [LAAppDelegate new]; }
void *la_component_new(const char *name) {
    if (strcmp(name, "analytics") == 0) return [LAAnalytics new];
    if (strcmp(name, "push") == 0) return [LAPush new];
    return NULL;
}
void la_application_set_delegate(void *application, void *delegate) {
    [(LAApplication *)application setDelegate:(id)delegate];
}
void la_application_run(void *application) {
    NSAutoreleasePool *pool = [NSAutoreleasePool new];
    [(LAApplication *)application run];
    [pool drain];
}
void la_release(void *object) { [(id)object release]; }
